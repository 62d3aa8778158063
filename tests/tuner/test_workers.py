"""Several workers on one study: 6 independent commands at once on the default journal, on a
new SQLite file and on PostgreSQL reach exactly the requested total, run no trial twice (the
warm start is enqueued once, an enqueued trial is claimed once), sample distinct plans, and
print no traceback; `study.workers=N` forks N workers of one prepared problem."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal._storage import JournalOperation
from optuna.trial import TrialState

from ipu_tune.config import TuneConfig
from ipu_tune.records import TrialRecord
from ipu_tune.storage import ResultsStore, open_storage
from ipu_tune.tuner import Prepared, open_study, prepare
from ipu_tune.tuner._worker import work
from tests.conftest import REPO
from tests.search._helpers import compose_cfg
from tests.tuner._inspect import study_state

MAX_SHARED_PARAMS = 0.02  # fraction of finished trials whose parameters another one repeats


def _check_study(results: Path, name: str, storage: str | None, n_trials: int) -> None:
    state = study_state(results, name, storage)
    assert len(state["complete"]) == n_trials  # type: ignore[arg-type]
    assert len(state["numbers"]) == len(set(state["numbers"]))  # type: ignore[arg-type]
    assert not state["running"]
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
    study = state["study"]
    done = study.get_trials(deepcopy=False,  # type: ignore[attr-defined]
                            states=(TrialState.COMPLETE, TrialState.PRUNED))
    keys = Counter(tuple(sorted((k, repr(v)) for k, v in t.params.items())) for t in done)
    shared = sum(n for n in keys.values() if n > 1)
    assert shared <= MAX_SHARED_PARAMS * len(done), (
        f"{shared} of {len(done)} finished trials share their parameters with another")


def _six_commands(tmp_path: Path, storage: str | None, n_trials: int = 120) -> None:
    results = tmp_path / "results"
    name = "six"
    args = [f"results_dir={results}", f"study.name={name}", f"study.n_trials={n_trials}",
            "study.progress_bar=false"]
    if storage is not None:
        args.append(f"study.storage={storage}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-m", "ipu_tune", *args], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert "Traceback" not in err + out and "database is locked" not in err + out
    _check_study(results, name, storage, n_trials)


@pytest.mark.slow
def test_six_commands_on_the_default_journal(tmp_path: Path) -> None:
    _six_commands(tmp_path, None)


@pytest.mark.slow
def test_six_commands_on_a_new_sqlite_file(tmp_path: Path) -> None:
    # Neither "UNIQUE constraint failed: alembic_version" nor an enqueued trial run twice.
    _six_commands(tmp_path, f"sqlite:///{tmp_path / 'new.db'}")


@pytest.mark.slow
def test_six_commands_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    _six_commands(tmp_path, pg_url)


@pytest.mark.slow
def test_workers_option_forks_workers_of_one_prepared_problem(tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", "study.name=pool",
         "study.n_trials=60", "study.workers=3", "study.progress_bar=false"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    _check_study(results, "pool", None, 60)
    # Local workers record their trials outside the study; the journal names the writer
    # (one per process's storage) of every trial it creates.
    ops = [json.loads(line) for line in (results / "ipu_tune.journal").read_text().splitlines()]
    writers = {op["worker_id"] for op in ops if op["op_code"] == JournalOperation.CREATE_TRIAL}
    assert len(writers) > 1, "trials should come from several processes"


@contextlib.contextmanager
def _opened(cfg: TuneConfig, warm_start: bool = False) -> Iterator[tuple[Prepared, optuna.Study,
                                                                          ResultsStore]]:
    """The prepared problem, its study (opened as `run` opens it) and results store."""
    prep = prepare(cfg)
    store = ResultsStore(prep.target.results_url)
    try:
        study = open_study(None, open_storage(prep.target), cfg, prep.problem,
                           claims=prep.target.claims, warm_start=warm_start).study
        yield prep, study, store
    finally:
        store.close()


def test_one_worker_per_command_refines(tmp_path: Path) -> None:
    """`work(refine=False)` (every forked worker but the first) runs trials and enqueues no
    local-search plan; the refining worker does, on the same study."""
    cfg = compose_cfg("model=resnet101", "search=throughput", f"results_dir={tmp_path}",
                      "study.progress_bar=false", "study.n_trials=30")
    with _opened(cfg, warm_start=True) as (prep, study, store):

        def local() -> list[str]:
            return [o for o in (TrialRecord.of(t).origin for t in study.trials)
                    if o.startswith("local search")]

        assert work(study, prep.problem, store, prep.target.claims, 15, refine=False) == 15
        assert not local()
        assert work(study, prep.problem, store, prep.target.claims, 30) == 15
        assert local()


def test_a_lone_worker_reads_the_study_only_near_its_budget(tmp_path: Path) -> None:
    """The slot check reads the study once in 16 trials and for the last three (alone, its
    estimate is exact): 40 trials finish, none is a surplus, a resume at the same budget runs
    none."""
    cfg = compose_cfg("model=resnet101", "sampler=random", f"results_dir={tmp_path}",
                      "study.progress_bar=false", "study.n_trials=40")
    with _opened(cfg) as (prep, study, store):
        reads: list[object] = []
        read = study.get_trials

        def counted(*args: object, **kwargs: object) -> object:
            reads.append(kwargs.get("states"))
            return read(*args, **kwargs)  # type: ignore[arg-type]

        study.get_trials = counted  # type: ignore[method-assign,assignment]
        assert work(study, prep.problem, store, prep.target.claims, 40, refine=False) == 40
        assert len(reads) == 6, reads  # the first, every 16 (16, 32), the last three
        assert work(study, prep.problem, store, prep.target.claims, 40, refine=False) == 0
        assert {t.state for t in read()} <= {TrialState.COMPLETE, TrialState.PRUNED}
        assert len(read()) == 40


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


def test_a_killed_worker_is_a_fault_and_the_others_trials_are_kept(tmp_path: Path) -> None:
    """One worker SIGKILLed: exit 1 (not the bad-input 2), one line naming it and its signal,
    and what the others finished stored, in the results table and exported, as a normal end."""
    import signal
    import time

    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ipu_tune", "model=resnet50", "system=pod4", "study.name=k",
         "study.n_trials=300", "study.workers=3", "study.progress_bar=false",
         f"results_dir={results}"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = results / "ipu_tune.journal"
    end = time.monotonic() + 60
    while time.monotonic() < end and not (
            len(_children(proc.pid)) == 3 and journal.exists() and journal.stat().st_size > 2e4):
        time.sleep(0.02)
    victim = _children(proc.pid)[1]
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert re.search(rf"worker \d \(pid {victim}\) was killed by SIGKILL", err), err
    assert "stored and exported" in err
    state = study_state(results, "k")
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
    assert not state["running"]  # the killed worker's trial: failed, naming it
    failed = [t for t in state["study"].trials  # type: ignore[attr-defined]
              if t.system_attrs.get("fail_reason", "").startswith("worker died")]
    assert all(f":{victim}:" in t.system_attrs["fail_reason"] for t in failed)
    assert (results / "k" / "best.yaml").exists() and (results / "k" / "report.html").exists()
