"""Tuner overhead: per-trial time of the main command's loop against a bare Optuna loop.

Both use the same storage kind (a fresh journal file on disk: Optuna's `JournalStorage` for the
bare loop, or ipu-tune's with `--bare-storage ipu-tune`), the same sampler and the same
objective (`SearchProblem.run_trial`: sampling + simulation + the constraints it records). The
bare loop is `Study.optimize`. What the tuner adds per trial: the claim lock and the worker's
record of its trial (a locked local file, no storage write), the slot check, the plan
attribute (config + result, one write), `Study.tell` (ask-and-tell: the claim lock must hold
`ask`), the results-table rows (batched), and, with the local search on (`sampler.local_search`,
TPE's default), the climbs after each trial (`refine_study`), which the bare loop does not run:
`--no-local-search` measures the bookkeeping alone with TPE.

Rounds are paired and interleaved (bare, tuner, bare, tuner, ...) and the median of the
per-round ratios is reported, so that a loaded machine slows both alike. Figures per size:
- per trial, the trial loop: the bare loop's `optimize` time and the tuner's trial loop
  (`RunSummary.trials_s`), each over its trials (target <= 1.2x);
- per trial beyond the first, the whole run: (T(n) - T(1)) / (n - 1), each loop's 1-trial run
  of the same round subtracted: the tuner's preparation cancels, the growth of its end-of-run
  exports and report with the study stays (a fixed cost users wait for once: its own
  figures are in benchmarks/startup.py and report_build.py);
- CPU per trial of the whole run.

    python benchmarks/tuner_overhead.py [--trials 100 500 1000] [--sampler random] [--rounds 3]
        [--bare-storage optuna|ipu-tune] [--no-local-search]

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
from ipu_tune.hardware import system_from_config
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem
from ipu_tune.storage import FlockLock, open_storage, resolve_storage
from ipu_tune.tuner import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

_CPU: list[float] = []  # CPU seconds per trial of each loop run, in run order (one process)


_BARE_ON_IPU_TUNE_STORAGE = False  # the bare loop on ipu-tune's journal (`--bare-storage`)
_LOCAL_SEARCH: bool | None = None  # None: the sampler preset's own `sampler.local_search`


def _cfg(results: Path, n: int, sampler: str) -> TuneConfig:
    register()
    local = [] if _LOCAL_SEARCH is None else [f"sampler.local_search={_LOCAL_SEARCH}"]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[
            f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
            "search.warm_start=false", f"sampler={sampler}", *local]))


def bare(n: int, sampler: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n, sampler)
        profile = profile_model(cfg.model)
        system = system_from_config(cfg.system)
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


_LOOP: list[float] = []  # the tuner's trial loop, seconds per trial, in run order


def tuner(n: int, sampler: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _cfg(Path(tmp), n, sampler)
        start, cpu = time.perf_counter(), time.process_time()
        summary = run(cfg)
        _CPU.append((time.process_time() - cpu) / n)
        _LOOP.append(summary.trials_s / n)
        return (time.perf_counter() - start) / n


def _marginal_s(total_n_s: float, n: int, total_1_s: float) -> float:
    """Seconds per trial beyond the first: (T(n) - T(1)) / (n - 1), the fixed cost removed."""
    return (total_n_s - total_1_s) / (n - 1)


def _show(pairs: list[tuple[float, float]]) -> str:
    """'bare / ipu-tune (ratio)' in ms per trial: medians, the ratio the median of the rounds'."""
    b = statistics.median(p[0] for p in pairs)
    t = statistics.median(p[1] for p in pairs)
    r = statistics.median(p[1] / p[0] for p in pairs)
    return f"{1e3 * b:.2f} / {1e3 * t:.2f} ({r:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, nargs="+", default=[100])
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bare-storage", choices=("optuna", "ipu-tune"), default="optuna",
                        help="the bare loop's journal storage: Optuna's, or ipu-tune's (one "
                             "fsync per trial: isolates the tuner's bookkeeping)")
    parser.add_argument("--no-local-search", action="store_true",
                        help="the tuner with sampler.local_search=false: the sampler alone, "
                             "as in the bare loop")
    args = parser.parse_args()
    global _BARE_ON_IPU_TUNE_STORAGE, _LOCAL_SEARCH
    _BARE_ON_IPU_TUNE_STORAGE = args.bare_storage == "ipu-tune"
    _LOCAL_SEARCH = False if args.no_local_search else None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    bare(3, args.sampler), tuner(3, args.sampler)  # warm the profile cache and imports
    kind = args.sampler + (", local search off" if args.no_local_search else "")
    print(f"Ratios: median of {args.rounds} paired rounds; ms per trial, bare / ipu-tune.")
    print("| trials | trial loop per trial | whole run per trial beyond the first | "
          "CPU per trial, whole run |")
    print("| --- | --- | --- | --- |")
    record = Run("tuner_overhead")
    for n in args.trials:
        loop: list[tuple[float, float]] = []
        marginal: list[tuple[float, float]] = []
        cpu: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            b1, t1 = bare(1, args.sampler), tuner(1, args.sampler)
            b = bare(n, args.sampler)
            cb = _CPU[-1]
            t = tuner(n, args.sampler)
            loop.append((b, _LOOP[-1]))
            marginal.append((_marginal_s(b * n, n, b1), _marginal_s(t * n, n, t1)))
            cpu.append((cb, _CPU[-1]))
        print(f"| {n} ({kind}) | {_show(loop)} | {_show(marginal)} | {_show(cpu)} |",
              flush=True)
        for label, pairs, target in (
                ("per trial, the trial loop", loop, "<= 1.2"),
                ("per trial beyond the first, whole run with exports and report", marginal,
                 None),
                ("CPU per trial, whole run", cpu, None)):
            ratios = [p[1] / p[0] for p in pairs]
            record.add(f"{n} trials ({kind}): {label}, ipu-tune / bare loop on "
                       f"{args.bare_storage}'s journal",
                       statistics.median(ratios), f"ratio, median of {args.rounds} paired rounds",
                       spread=(min(ratios), max(ratios)), target=target,
                       note=f"ms per trial, bare / ipu-tune: {_show(pairs).split(' (')[0]}")
    record.save()


if __name__ == "__main__":
    main()
