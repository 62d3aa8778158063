"""Long studies: TPE's cost per trial as the study grows, with and without a bounded history.

One loop per setting (the main command's problem, `SearchProblem.run_trial` as the objective,
an in-memory storage so that only the sampler and the simulator count), all in one process,
interleaved in rounds: TPE as configured, TPE with `sampler.params.history=N`, and random (the
floor: sampling and simulation without a model). Reported per setting: milliseconds per trial
in windows of the run (trials 100-200, ..., the last 100), and the best value reached (the
search quality the window keeps or loses).

Figures are recorded with benchmarks/_record.py's `Run` (per setting and window: median ms per
trial over the rounds, spread: min and max; the best value reached);
`python benchmarks/write_results.py` renders them into benchmarks/RESULTS.md.

    python benchmarks/tpe_long.py [--trials 1500] [--history 500] [--rounds 1]
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
from optuna.study import StudyDirection

from ipu_tune.config import CONF_DIR, TuneConfig, register, typed
from ipu_tune.hardware import system_from_config
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

_WINDOW = 100
STORAGE = "in-memory storage (sampler and simulator only)"


def _problem(overrides: list[str]) -> SearchProblem:
    register()
    with tempfile.TemporaryDirectory() as tmp, initialize_config_dir(
            version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=[
            f"results_dir={tmp}", *overrides]))
    return SearchProblem(cfg, profile_model(cfg.model),
                         system_from_config(cfg.system))


def one_run(problem: SearchProblem, n: int) -> tuple[list[float], float | None]:
    """(seconds of each trial, best first objective among feasible trials)."""
    directions = [StudyDirection[d.upper()] for d in problem.directions]
    study = optuna.create_study(sampler=problem.sampler(), directions=directions)
    times: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        trial = study.ask()
        outcome = problem.run_trial(trial)
        study.tell(trial, [float(v) for v in outcome.values])
        times.append(time.perf_counter() - start)
    best = problem.best_trial(study)
    return times, (best.values[0] if best is not None and best.values else None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1500)
    parser.add_argument("--history", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = {
        "tpe": _problem([]),
        f"tpe history={args.history}": _problem([f"+sampler.params.history={args.history}"]),
        "random": _problem(["sampler=random"]),
    }
    record = Run("tpe_long")
    last = args.trials - _WINDOW
    starts = sorted({*range(_WINDOW, last, _WINDOW * 4), last})
    per: dict[str, list[list[float]]] = {k: [] for k in settings}
    best: dict[str, list[float | None]] = {k: [] for k in settings}
    for _ in range(args.rounds):
        for name, problem in settings.items():
            times, top = one_run(problem, args.trials)
            per[name].append([1e3 * statistics.mean(times[s:s + _WINDOW]) for s in starts])
            best[name].append(top)
            print(f"{name}: " + ", ".join(f"{s}-{s + _WINDOW}: {ms:.1f} ms"
                                          for s, ms in zip(starts, per[name][-1], strict=True))
                  + f"; best {top}", flush=True)
    for name, rounds in per.items():
        for i, window in enumerate(starts):
            values = [r[i] for r in rounds]
            record.add(f"{name}: ms per trial, trials {window}-{window + _WINDOW}",
                       statistics.median(values), f"ms, median of {args.rounds} round(s)",
                       spread=(min(values), max(values)), note=STORAGE)
        tops = [b for b in best[name] if b is not None]
        if tops:
            record.add(f"{name}: best throughput after {args.trials} trials",
                       statistics.median(tops), f"samples/s, median of {args.rounds} round(s)",
                       spread=(min(tops), max(tops)))
    record.save()

if __name__ == "__main__":
    main()
