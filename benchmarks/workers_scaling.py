"""Workers that scale: `study.workers=2` against `1` on the same 300-trial study.

Paired in one process (order 1, 2, then 2, 1 with --pairs 2): each run tunes a fresh journal
study with the main command's `run` (prepared once by this process; the workers are forked
after preparation). Reported per run: wall seconds of `run` (storage, trials, results rows,
exports) and the trial phase's throughput from the study's own timestamps (first trial's
start to last trial's completion), then the ratios 2 workers / 1 worker.

    python benchmarks/workers_scaling.py [--trials 300] [--pairs 1]

The ratio needs two idle cores: other processes on the machine lower it, and the load average
(a minute's mean) misses a neighbour that takes a core for a few seconds. So each run is
bracketed by a probe of the cores free: two processes spinning in parallel against one alone
(2.0 when both cores are free, 1.0 when another job holds one); the lowest probe of each pair
is printed and recorded. The journal is on disk (the temporary folder's file system).
Figures go to benchmarks/runs/workers_scaling.json (value: mean of the pairs' ratios, spread:
min and max, load from os.getloadavg() before and after, date).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir
from optuna.trial import TrialState

from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import prepare, run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run


def _cfg(results: Path, n: int, workers: int) -> TuneConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[
            f"results_dir={results}", f"study.n_trials={n}", f"study.workers={workers}",
            "study.progress_bar=false", "study.name=scaling"]))


def _cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _spin(_: object = None) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    return time.perf_counter() - start


def free_cores() -> float:
    """Cores free right now: one spinning process's time over the slower of two in parallel,
    times two (about 2.0 on two idle cores, 1.0 when another job holds one)."""
    alone = _spin()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        both = max(pool.map(_spin, [None, None]))
    return 2 * alone / both


def one_run(n: int, workers: int, where: str | None = None) -> tuple[float, float, float]:
    """(wall seconds of `run`, trials per second of the trial phase, CPU ms per trial of this
    process and its workers)."""
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        prep = prepare(_cfg(Path(tmp), n, workers))
        start, cpu = time.perf_counter(), _cpu_s()
        run(prep)
        wall_s = time.perf_counter() - start
        cpu_ms = 1e3 * (_cpu_s() - cpu) / n
        study = optuna.load_study(study_name="scaling",
                                  storage=open_storage(resolve_storage(None, tmp)))
        # Finished: COMPLETE (feasible) and PRUNED (infeasible) trials alike.
        done = study.get_trials(deepcopy=False,
                                states=(TrialState.COMPLETE, TrialState.PRUNED))
        first = min(t.datetime_start for t in done if t.datetime_start is not None)
        last = max(t.datetime_complete for t in done if t.datetime_complete is not None)
        return wall_s, len(done) / (last - first).total_seconds(), cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--dir", default=None,
                        help="folder of the journal (default: the temporary folder, on disk); "
                             "/dev/shm compares with a journal in memory")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    record = Run("workers_scaling")
    one_run(5, 1)  # warm the profile cache and imports
    runs: dict[int, list[tuple[float, float, float]]] = {1: [], 2: []}
    free: list[float] = []  # the lowest probe of cores free around each pair
    for pair in range(args.pairs):
        probes = [free_cores()]
        for workers in ((1, 2) if pair % 2 == 0 else (2, 1)):
            runs[workers].append(one_run(args.trials, workers, args.dir))
            probes.append(free_cores())
        free.append(min(probes))
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}, cores free "
          f"(lowest probe per pair): {', '.join(f'{f:.2f}' for f in free)}")
    print(f"| workers | run wall s ({args.trials} trials) | trial phase, trials/s | "
          "CPU ms per trial (all processes) |")
    print("| --- | --- | --- | --- |")
    for workers, rows in runs.items():
        for wall_s, rate, cpu_ms in rows:
            print(f"| {workers} | {wall_s:.1f} | {rate:.1f} | {cpu_ms:.1f} |")
    walls = [a[0] / b[0] for a, b in zip(runs[1], runs[2], strict=True)]
    rates = [b[1] / a[1] for a, b in zip(runs[1], runs[2], strict=True)]
    print(f"| speed-up 2 vs 1 (paired) | {sum(walls) / len(walls):.2f}x wall | "
          f"{sum(rates) / len(rates):.2f}x trials/s | "
          f"{sum(b[2] / a[2] for a, b in zip(runs[1], runs[2], strict=True)) / len(walls):.2f}x "
          "CPU per trial |")
    where = args.dir or "the temporary folder, on disk"
    for label, values, target in (("run wall time", walls, ">= 1.7"),
                                  ("trial phase, trials/s", rates, None)):
        record.add(f"{args.trials} trials: study.workers=2 vs 1, {label}",
                   sum(values) / len(values), f"speed-up, mean of {args.pairs} paired runs",
                   spread=(min(values), max(values)), target=target,
                   note=f"journal in {where}; cores free (lowest probe per pair): "
                        f"{', '.join(f'{f:.2f}' for f in free)}")
    record.save()


if __name__ == "__main__":
    main()
