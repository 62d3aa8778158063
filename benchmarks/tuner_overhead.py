"""Tuner overhead: per-trial time of the main command's loop against a bare Optuna loop.

Both use the same storage kind (a fresh journal file), the same sampler and the same objective
(`SearchProblem.run_trial`: sampling + simulation + the constraints it records). The difference
is what the tuner adds per trial: the claim lock and worker tag, the rank check, the plan
attribute (config + result, one write), the results-table rows (batched), the progress
bookkeeping, and the end-of-run exports and report (amortised over the trials).

Rounds are paired and interleaved (bare, tuner, bare, tuner, ...) and the median of the
per-round ratios is reported, so that a loaded machine slows both alike. `--sampler random`
isolates the storage and bookkeeping cost (TPE's own per-trial cost grows with the study and
is the same in both loops).

    python benchmarks/tuner_overhead.py [--trials 100 500] [--sampler tpe] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, TuneConfig, register, typed
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import run

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
        storage = open_storage(resolve_storage(None, tmp))
        study = optuna.create_study(storage=storage, sampler=problem.sampler(),
                                    directions=problem.directions)

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, nargs="+", default=[100])
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bare(3, args.sampler), tuner(3, args.sampler)  # warm the profile cache and imports
    print(f"| trials | bare Optuna loop, ms per trial | ipu-tune run, ms per trial | "
          f"ratio (median of {args.rounds} paired rounds) | CPU ms per trial, bare / ipu-tune "
          "(ratio) |")
    print("| --- | --- | --- | --- | --- |")
    for n in args.trials:
        b, t, r, cb, ct = [], [], [], [], []
        for _ in range(args.rounds):
            b.append(bare(n, args.sampler))
            cb.append(_CPU[-1])
            t.append(tuner(n, args.sampler))
            ct.append(_CPU[-1])
            r.append(t[-1] / b[-1])
        cpu_b, cpu_t = statistics.median(cb), statistics.median(ct)
        print(f"| {n} ({args.sampler}, journal) | {1e3 * statistics.median(b):.1f} | "
              f"{1e3 * statistics.median(t):.1f} | {statistics.median(r):.2f}x | "
              f"{1e3 * cpu_b:.1f} / {1e3 * cpu_t:.1f} ({cpu_t / cpu_b:.2f}x) |", flush=True)


if __name__ == "__main__":
    main()
