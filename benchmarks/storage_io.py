"""Durable writes per trial, and the main command on an idle and on a contended disk.

1. fsyncs per trial: `run` of the main command's config (100 trials, journal on disk) in this
   process, with `os.fsync` and `os.fdatasync` counted (the journal's appends, the results
   table's SQLite commits, the exports' atomic replaces), divided by the finished trials.
2. The main command (`python -m ipu_tune model=resnet101 search=throughput`, a fresh results
   folder on disk each run) idle and with a parallel writer on the same disk: `dd` writing
   1 MB blocks with `oflag=dsync` in a loop, started before the command and stopped after it
   (bounded: at most the command's timeout). Runs are paired and alternate (idle, contended,
   contended, idle, ...); the median of the per-pair ratios contended / idle is reported.

Figures are recorded with benchmarks/_record.py's `Run` (value, spread: min and max over
pairs); `python benchmarks/write_results.py` renders them into benchmarks/RESULTS.md.

    python benchmarks/storage_io.py [--pairs 3] [--trials 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
from hydra import compose, initialize_config_dir
from optuna.trial import TrialState

from ipu_tune.config import CONF_DIR, TuneConfig, register, typed
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

WRITER = "writer: dd bs=1M count=64 oflag=dsync in a loop, same file system"
REPO = Path(__file__).resolve().parent.parent
_COUNT = {"fsync": 0, "fdatasync": 0}


def _counting(name: str) -> None:
    real = getattr(os, name)

    def wrapper(fd: int) -> None:
        _COUNT[name] += 1
        real(fd)

    setattr(os, name, wrapper)


def fsyncs_per_trial(n: int, where: Path) -> dict[str, float]:
    register()
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            cfg = typed(TuneConfig, compose(config_name="config", overrides=[
                f"results_dir={tmp}", f"study.n_trials={n}", "study.progress_bar=false",
                "study.name=io"]))
        before = dict(_COUNT)
        run(cfg)
        study = optuna.load_study(study_name="io", storage=open_storage(resolve_storage(None, tmp)))
        done = len(study.get_trials(deepcopy=False,
                                    states=(TrialState.COMPLETE, TrialState.PRUNED)))
    syncs = sum(_COUNT.values()) - sum(before.values())
    return {"fsyncs": syncs, "finished_trials": done, "per_trial": syncs / done}


def main_command_s(where: Path, contended: bool, repo: Path = REPO,
                   timeout_s: float = 300) -> float:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        writer = None
        if contended:
            # A parallel writer on the same disk: synchronous 1 MB writes, rewritten in a loop.
            script = (f"end=$(( $(date +%s) + {int(timeout_s)} )); while [ $(date +%s) -lt $end ];"
                      f" do dd if=/dev/zero of={tmp}/dd.bin bs=1M count=64 oflag=dsync "
                      "status=none; done")
            writer = subprocess.Popen(["sh", "-c", script], start_new_session=True)
            time.sleep(0.5)  # the writer is busy before the command starts
        try:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ipu_tune", "model=resnet101",
                            "search=throughput", f"results_dir={tmp}/results",
                            "study.progress_bar=false"],
                           cwd=tmp, env={**os.environ, "PYTHONPATH": str(repo)},
                           check=True, capture_output=True, timeout=timeout_s)
            return time.perf_counter() - start
        finally:
            if writer is not None:
                os.killpg(writer.pid, 15)
                writer.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout whose main command runs in the same pairs")
    parser.add_argument("--baseline-label", default="",
                        help="what the baseline checkout is (a commit), for the figures file")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    where = Path(tempfile.gettempdir())
    record = Run("storage_io")
    _counting("fsync")
    _counting("fdatasync")
    syncs = fsyncs_per_trial(args.trials, where)
    print(f"fsyncs: {syncs['fsyncs']} for {syncs['finished_trials']} finished trials = "
          f"{syncs['per_trial']:.2f} per trial")
    main_command_s(where, False)  # warm the profile cache
    pairs: list[tuple[float, float]] = []
    base: list[tuple[float, float]] = []
    for p in range(args.pairs):
        order = (False, True) if p % 2 == 0 else (True, False)
        got = {c: main_command_s(where, c) for c in order}
        pairs.append((got[False], got[True]))
        print(f"pair {p}: idle {got[False]:.2f} s, contended {got[True]:.2f} s "
              f"({got[True] / got[False]:.2f}x)", flush=True)
        if args.baseline is not None:
            old = {c: main_command_s(where, c, args.baseline) for c in order}
            base.append((old[False], old[True]))
            print(f"  baseline: idle {old[False]:.2f} s, contended {old[True]:.2f} s "
                  f"({old[True] / old[False]:.2f}x)", flush=True)
    ratios = [c / i for i, c in pairs]
    for name, value, unit, spread, note in storage_io_figures(
            syncs, pairs, base, args.baseline_label or str(args.baseline)):
        record.add(name, value, unit, spread=spread, note=note)
    record.save()
    print(f"contended / idle: {statistics.median(ratios):.2f}x (median of {len(ratios)} pairs)")


Figure = tuple[str, float, str, tuple[float, float] | None, str | None]


def _median_spread(values: list[float]) -> tuple[float, tuple[float, float]]:
    return statistics.median(values), (min(values), max(values))


def storage_io_figures(syncs: dict[str, Any], pairs: list[tuple[float, float]],
                       base: list[tuple[float, float]], baseline: str) -> list[Figure]:
    """The figures of one run: fsyncs per trial, then the paired idle / contended timings."""
    out: list[Figure] = [(
        "fsyncs per finished trial (main command's config, journal on disk)",
        syncs["per_trial"], "fsyncs per trial", None,
        f"{syncs['fsyncs']} fsyncs for {syncs['finished_trials']} finished trials")]
    n = f"median of {len(pairs)} pairs"
    for label, values in (("idle disk", [i for i, _ in pairs]),
                          ("contended disk", [c for _, c in pairs])):
        value, spread = _median_spread(values)
        out.append((f"main command, {label}", value, f"s, {n}", spread, WRITER))
    value, spread = _median_spread([c / i for i, c in pairs])
    out.append(("main command, contended / idle", value, f"ratio, {n}", spread, WRITER))
    for label, values in (("idle disk", [i for i, _ in base]),
                          ("contended disk", [c for _, c in base])):
        if values:
            value, spread = _median_spread(values)
            out.append((f"main command of a baseline checkout, {label}", value, f"s, {n}",
                         spread, f"baseline: {baseline}"))
    return out


if __name__ == "__main__":
    main()
