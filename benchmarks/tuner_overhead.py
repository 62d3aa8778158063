"""Tuner overhead: per-trial time of the main command's loop against a bare Optuna loop.

Both use the same storage kind (a fresh journal file), the same sampler and the same objective
(`SearchProblem.run_trial`: sampling + simulation). The difference is what the tuner adds per
trial: worker tag and rank check, four user attributes, the results-table row, the progress
bookkeeping. Also times the whole main command as a user runs it (default budget).

    python benchmarks/tuner_overhead.py [--trials 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import run

REPO = Path(__file__).resolve().parent.parent


def _cfg(results: Path, n: int) -> TuneConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[
            f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
            "search.warm_start=false"]))


def bare(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n)
        profile = profile_model(cfg.model)
        system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
        problem = SearchProblem(cfg, profile, system)
        storage = open_storage(resolve_storage(None, tmp))
        study = optuna.create_study(storage=storage, sampler=problem.sampler(),
                                    directions=problem.directions)

        def objective(trial: optuna.Trial) -> list[float]:
            out = problem.run_trial(trial)
            trial.set_user_attr("constraints", [float(c) for c in out.constraints])
            return [float(v) for v in out.values]

        start = time.perf_counter()
        study.optimize(objective, n_trials=n)
        return (time.perf_counter() - start) / n


def tuner(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n)
        start = time.perf_counter()
        run(cfg)
        return (time.perf_counter() - start) / n


def main_command() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ipu_tune", "model=resnet101", "search=throughput",
                        "study.progress_bar=false"], cwd=tmp, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bare(5), tuner(5)  # warm the profile cache and imports
    b, t = bare(args.trials), tuner(args.trials)
    print(f"| loop | ms per trial ({args.trials} trials, journal storage) |")
    print("| --- | --- |")
    print(f"| bare Optuna loop | {1e3 * b:.1f} |")
    print(f"| ipu-tune run (incl. results rows and exports) | {1e3 * t:.1f} |")
    print(f"| ratio | {t / b:.2f}x |")
    print(f"\nmain command, default budget, wall clock: {main_command():.1f} s")


if __name__ == "__main__":
    main()
