"""Start-up and fixed costs where users wait, as paired same-run ratios (medians).

Each figure is measured against its reference in the same round, rounds interleaved, so that
the load of a shared machine hits both alike:

- `ipu_tune.evaluate(mapping)` per call (cached model) against the simulation it wraps, and
  against the OmegaConf merge it used to do per call;
- `python -m ipu_tune --help` against a bare `python -c pass` and Hydra's own help;
- `python -m ipu_tune studies` against a bare Optuna script listing the same journal;
- a one-trial run (compose, prepare, trial, exports, report) against a bare Optuna script
  running one trial on the same kind of storage (a fresh journal file), with the profile and
  the composition of the defaults cached (a warm-up run fills both, as any earlier run does);
- the time to the first byte on a terminal after `python -m ipu_tune study.n_trials=1`;
- exports and report of that one-trial study (best.yaml, the framework programs, explain,
  report.html), in process: wall and CPU seconds (no reference: the target is absolute).

Our package's bytecode is compiled first (`compileall`, as `pip install` does): an environment
with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module of ours on every start.

    python benchmarks/startup.py [--rounds 5] [--only evaluate|cli|exports]
"""

from __future__ import annotations

import argparse
import compileall
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _record import Run

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

BARE_ONE_TRIAL = """
import sys, optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = JournalStorage(JournalFileBackend(sys.argv[1]))
study = optuna.create_study(storage=storage, study_name="bare", direction="maximize")
def objective(trial):
    x = [trial.suggest_int(f"k{i}", 1, 64, log=True) for i in range(13)]
    return float(sum(x))
study.optimize(objective, n_trials=1)
print(study.best_value)
"""

BARE_LIST = """
import sys, optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
for s in optuna.get_all_study_summaries(JournalStorage(JournalFileBackend(sys.argv[1]))):
    print(s.study_name, s.n_trials)
"""


def _wall(args: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=cwd, env=ENV, check=True, capture_output=True)
    return time.perf_counter() - start


def _first_byte_s(args: list[str], cwd: Path) -> float:
    """Seconds from start to the first byte the command writes to a terminal (stderr)."""
    leader, follower = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    first = float("nan")
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(leader, 1024)
        except OSError:
            break
        if data and first != first:
            first = time.perf_counter() - start
        if not data:
            break
    proc.wait()
    os.close(leader)
    return first


_ROUNDS: dict[str, list[float]] = {}  # the rounds behind the last `_paired` call's medians


def _paired(rounds: int, ours: Callable[[], float], ref: Callable[[], float]) -> tuple[
        float, float, float]:
    """Median of ours, median of the reference, median of the per-round ratio (the rounds
    themselves are left in `_ROUNDS` for the record's spread)."""
    a, b, r = [], [], []
    for _ in range(rounds):
        x, y = ours(), ref()
        a.append(x)
        b.append(y)
        r.append(x / y)
    _ROUNDS.update(ours=a, ref=b, ratio=r)
    return statistics.median(a), statistics.median(b), statistics.median(r)


def _spread(key: str, scale: float = 1.0) -> tuple[float, float]:
    return scale * min(_ROUNDS[key]), scale * max(_ROUNDS[key])


def evaluate_per_call(record: Run, rounds: int, calls: int = 300) -> None:
    import ipu_tune
    from ipu_tune.case import build_case, simulate_case
    from ipu_tune.config import EvalConfig, load_config, validate
    from ipu_tune.config._load import _omegaconf_typed

    mapping = {"model": {"name": "resnet101"}, "system": {"num_ipus": 2},
               "plan": {"precision": "16.16", "pipeline": {"splits": ["layer3.10"]},
                        "gradient_accumulation": 8}}
    case = build_case(load_config(mapping))
    ipu_tune.evaluate(mapping)

    def per_call(f: Callable[[], object], n: int = calls) -> float:
        start = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - start) / n

    ev, sim, ratio = _paired(rounds, lambda: per_call(lambda: ipu_tune.evaluate(mapping)),
                             lambda: per_call(lambda: simulate_case(case)))
    record.add("evaluate(mapping), cached model", 1e3 * ev, "ms per call, median of rounds",
               spread=_spread("ours", 1e3), target="<= 0.2")
    record.add("simulate alone (same rounds)", 1e3 * sim, "ms per call, median of rounds",
               spread=_spread("ref", 1e3))
    old, new, speedup = _paired(
        rounds, lambda: per_call(lambda: validate(_omegaconf_typed(EvalConfig, mapping)), 20),
        lambda: per_call(lambda: load_config(mapping)))
    record.add("mapping -> validated config", 1e3 * new, "ms per call, median of rounds",
               spread=_spread("ref", 1e3))
    record.add("OmegaConf merge of the same mapping (same rounds)", 1e3 * old,
               "ms per call, median of rounds", spread=_spread("ours", 1e3))
    print(f"| evaluate(mapping), cached model | {1e3 * ev:.3f} ms per call | simulate alone "
          f"{1e3 * sim:.3f} ms | {ratio:.2f}x (overhead {1e3 * (ev - sim):.3f} ms) |")
    print(f"| mapping -> validated config | {1e3 * new:.3f} ms per call | OmegaConf merge "
          f"{1e3 * old:.3f} ms | {new / old:.3f}x ({old / new:.0f}x faster) |")
    del speedup


def cli(record: Run, rounds: int) -> None:
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Warm the profile cache and leave a stored study for `studies`.
        subprocess.run([py, "-m", "ipu_tune", "study.n_trials=2", "study.progress_bar=false"],
                       cwd=root, env=ENV, check=True, capture_output=True)
        journal = root / "results" / "ipu_tune.journal"

        ours, ref, ratio = _paired(rounds, lambda: _wall([py, "-m", "ipu_tune", "--help"], root),
                                   lambda: _wall([py, "-c", "pass"], root))
        print(f"| `--help` | {ours:.2f} s | bare `python -c pass` {ref:.2f} s | {ratio:.1f}x |")
        record.add("python -m ipu_tune --help", ours, "s wall, median of rounds",
                   spread=_spread("ours"), target="<= 1")
        record.add("bare python -c pass (same rounds)", ref, "s wall, median of rounds",
                   spread=_spread("ref"))
        ours, ref, ratio = _paired(
            max(1, rounds // 2), lambda: _wall([py, "-m", "ipu_tune", "--help"], root),
            lambda: _wall([py, "-m", "ipu_tune", "--hydra-help"], root))
        print(f"| `--help` | {ours:.2f} s | Hydra's help {ref:.2f} s | {ratio:.2f}x |")
        record.add("Hydra's own help (--hydra-help)", ref, "s wall, median of rounds",
                   spread=_spread("ref"))
        ours, ref, ratio = _paired(rounds, lambda: _wall([py, "-m", "ipu_tune", "studies"], root),
                                   lambda: _wall([py, "-c", BARE_LIST, str(journal)], root))
        print(f"| `studies` | {ours:.2f} s | bare Optuna listing {ref:.2f} s | {ratio:.2f}x |")
        record.add("python -m ipu_tune studies / bare Optuna listing", ratio,
                   "ratio, median of paired rounds", spread=_spread("ratio"),
                   note=f"{ours:.2f} s vs {ref:.2f} s")

        counter = iter(range(10_000))

        def one_trial() -> float:
            out = root / f"run{next(counter)}"
            return _wall([py, "-m", "ipu_tune", "study.n_trials=1", "study.progress_bar=false",
                          f"results_dir={out}"], root)

        def bare_trial() -> float:
            return _wall([py, "-c", BARE_ONE_TRIAL, str(root / f"bare{next(counter)}.journal")],
                         root)

        ours, ref, ratio = _paired(rounds, one_trial, bare_trial)
        print(f"| 1-trial run (incl. exports, report) | {ours:.2f} s | bare Optuna script "
              f"{ref:.2f} s | {ratio:.2f}x |")
        record.add("1-trial run incl. exports and report / bare Optuna one-trial script", ratio,
                   "ratio, median of paired rounds", spread=_spread("ratio"), target="<= 2",
                   note=f"{ours:.2f} s vs {ref:.2f} s")
        firsts = [_first_byte_s([py, "-m", "ipu_tune", "study.n_trials=1",
                                 f"results_dir={root / f'tty{i}'}"], root) for i in range(rounds)]
        first = statistics.median(firsts)
        print(f"| first output on a terminal, 1-trial run | {first:.2f} s | | |")
        record.add("first output on a terminal, 1-trial run", first, "s wall, median of rounds",
                   spread=(min(firsts), max(firsts)))


def exports(record: Run, rounds: int) -> None:
    """`export_study` (best.yaml, programs, explain, report.html) of a fresh one-trial study."""
    from hydra import compose, initialize_config_dir

    from ipu_tune.config import CONF_DIR, TuneConfig, register, typed
    from ipu_tune.storage import ResultsStore, open_storage
    from ipu_tune.tuner import export_study, open_study, prepare, run

    with tempfile.TemporaryDirectory() as tmp:
        register()
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            composed = compose(config_name="config", overrides=[
                "study.n_trials=1", "study.progress_bar=false", f"results_dir={tmp}",
                "plan.precision=16.16"])  # a plan that fits: every export is written
        prep = prepare(typed(TuneConfig, composed))
        summary = run(prep)
        assert summary.best_trial is not None and "poptorch" in summary.exports
        storage = open_storage(prep.target)
        study = open_study(summary.study_name, storage, prep.cfg, prep.problem, prep.pinned,
                           prep.target.claims).study
        store = ResultsStore(prep.target.results_url)
        walls, cpus = [], []
        for _ in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            export_study(study, prep.problem, store, prep.cfg, prep.target)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        store.close()
    print(f"| exports + report of a 1-trial study (in process) | {statistics.median(walls):.3f} s"
          f" wall, {statistics.median(cpus):.3f} s CPU | target 0.3 s | |")
    record.add("exports + report of a 1-trial study (in process)", statistics.median(walls),
               "s wall, median of rounds", spread=(min(walls), max(walls)), target="<= 0.3",
               note=f"CPU {statistics.median(cpus):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("evaluate", "cli", "exports"), default=None)
    args = parser.parse_args()
    compileall.compile_dir(str(REPO / "ipu_tune"), quiet=1)
    record = Run("startup")
    print("| what | ours (median) | reference (same rounds) | ratio ours/ref (median) |")
    print("| --- | --- | --- | --- |")
    if args.only in (None, "evaluate"):
        evaluate_per_call(record, args.rounds)
    if args.only in (None, "cli"):
        cli(record, args.rounds)
    if args.only in (None, "exports"):
        exports(record, args.rounds)
    record.save()


if __name__ == "__main__":
    main()
