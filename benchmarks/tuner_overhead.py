"""Tuner overhead: per-trial time of the main command's loop against a bare Optuna loop.

Both use the same storage kind (a fresh journal file on disk: Optuna's `JournalStorage` for the
bare loop, ipu-tune's for the tuner), the same sampler and the same objective
(`SearchProblem.run_trial`: sampling + simulation + the constraints it records). The difference
is what the tuner adds per trial: the claim lock and the worker's record of its trial (a
locked local file, no storage write), the slot check, the plan attribute (config + result, one
write), `study.tell`'s deep copy of the trial (the bare `Study.optimize` skips it), the
results-table rows (batched), the end-of-run exports and report (amortised over the
trials), and, with a sampler that refines (TPE), the local search after each trial
(`refine_study`: climbs from the best trials on the simulator, most of it in the first 100
trials), which the bare loop does not run.

Rounds are paired and interleaved (bare, tuner, bare, tuner, ...) and the median of the
per-round ratios is reported, so that a loaded machine slows both alike. Two figures per
size: the whole run per trial (fixed costs amortised), and the cost per trial beyond the
first, (T(n) - T(1)) / (n - 1), with each loop's 1-trial run of the same round subtracted.
`--sampler random` isolates the storage and bookkeeping cost (TPE's own per-trial cost grows
with the study and is the same in both loops).

    python benchmarks/tuner_overhead.py [--trials 100 500 1000] [--sampler random] [--rounds 3]

Figures go to benchmarks/runs/tuner_overhead.json (per size: the median ratio, its spread
over rounds; the machine's load before and after; the date), rendered into RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection

from ipu_tune.config import CONF_DIR, TuneConfig, register, typed
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem
from ipu_tune.storage import FlockLock, open_storage, resolve_storage
from ipu_tune.tuner import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

_CPU: list[float] = []  # CPU seconds per trial of each loop run, in run order (one process)


def _cfg(results: Path, n: int, sampler: str) -> TuneConfig:
    register()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[
            f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
            "search.warm_start=false", f"sampler={sampler}"]))


def bare(n: int, sampler: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n, sampler)
        profile = profile_model(cfg.model)
        system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
        problem = SearchProblem(cfg, profile, system)
        # Optuna's own journal storage on the same file (with the kernel lock ipu-tune uses):
        # what a bare Optuna script writes, one fsync'd append per event.
        target = resolve_storage(None, tmp)
        path = target.location
        storage = (open_storage(target) if _BARE_ON_IPU_TUNE_STORAGE else
                   JournalStorage(JournalFileBackend(path, lock_obj=FlockLock(path))))
        directions = [StudyDirection[d.upper()] for d in problem.directions]
        study = optuna.create_study(storage=storage, sampler=problem.sampler(),
                                    directions=directions)

        def objective(trial: optuna.Trial) -> list[float]:
            return [float(v) for v in problem.run_trial(trial).values]

        start, cpu = time.perf_counter(), time.process_time()
        study.optimize(objective, n_trials=n)
        _CPU.append((time.process_time() - cpu) / n)
        return (time.perf_counter() - start) / n


def tuner(n: int, sampler: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n, sampler)
        start, cpu = time.perf_counter(), time.process_time()
        run(cfg)
        _CPU.append((time.process_time() - cpu) / n)
        return (time.perf_counter() - start) / n


def _marginal_s(total_n_s: float, n: int, total_1_s: float) -> float:
    """Seconds per trial beyond the first: (T(n) - T(1)) / (n - 1), the fixed cost removed."""
    return (total_n_s - total_1_s) / (n - 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, nargs="+", default=[100])
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-storage", choices=("optuna", "ipu-tune"), default="optuna",
                        help="the bare loop's journal storage: Optuna's, or ipu-tune's (one "
                             "fsync per trial: isolates the tuner's bookkeeping)")
    args = parser.parse_args()
    global _BARE_ON_IPU_TUNE_STORAGE
    _BARE_ON_IPU_TUNE_STORAGE = args.bare_storage == "ipu-tune"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bare(3, args.sampler), tuner(3, args.sampler)  # warm the profile cache and imports
    print(f"Ratios: median of {args.rounds} paired rounds. Whole run: the loop's or `run`'s "
          "wall time / trials (the tuner's fixed cost of preparation, exports and report "
          "included). Per trial: (T(n) - T(1)) / (n - 1), each loop's 1-trial run of the same "
          "round subtracted (the fixed cost has its own target: a 1-trial run <= 2x bare, "
          "benchmarks/startup.py).")
    print("| trials | whole run, ms per trial: bare / ipu-tune (ratio) | "
          "per trial, ms: bare / ipu-tune (ratio) | CPU ms per trial, bare / ipu-tune (ratio) |")
    print("| --- | --- | --- | --- |")
    record = Run("tuner_overhead")
    for n in args.trials:
        whole: list[tuple[float, float]] = []
        marginal: list[tuple[float, float]] = []
        cpu: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            b1, t1 = bare(1, args.sampler), tuner(1, args.sampler)
            b = bare(n, args.sampler)
            cb = _CPU[-1]
            t = tuner(n, args.sampler)
            whole.append((b, t))
            marginal.append((_marginal_s(b * n, n, b1), _marginal_s(t * n, n, t1)))
            cpu.append((cb, _CPU[-1]))

        def show(pairs: list[tuple[float, float]]) -> str:
            b = statistics.median(p[0] for p in pairs)
            t = statistics.median(p[1] for p in pairs)
            r = statistics.median(p[1] / p[0] for p in pairs)
            return f"{1e3 * b:.1f} / {1e3 * t:.1f} ({r:.2f}x)"

        print(f"| {n} ({args.sampler}, journal) | {show(whole)} | {show(marginal)} | "
              f"{show(cpu)} |", flush=True)
        for label, pairs, target in (("whole run per trial", whole, None),
                                     ("per trial beyond the first", marginal, "<= 1.2"),
                                     ("CPU per trial", cpu, None)):
            ratios = [p[1] / p[0] for p in pairs]
            record.add(f"{n} trials ({args.sampler}): {label}, ipu-tune / bare loop on "
                       f"{args.bare_storage}'s journal",
                       statistics.median(ratios), f"ratio, median of {args.rounds} paired rounds",
                       spread=(min(ratios), max(ratios)), target=target,
                       note=f"ms per trial, bare / ipu-tune: {show(pairs).split(' (')[0]}")
    record.save()


if __name__ == "__main__":
    main()
