"""Several worker processes on one study reach exactly the requested total, with unique trial
numbers and one results row per finished trial: default journal storage and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from tests.conftest import REPO
from tests.tuner._inspect import study_state


def _workers(tmp_path: Path, n_workers: int, n_trials: int, storage: str | None) -> None:
    results = tmp_path / "results"
    name = f"many-{n_workers}-{'journal' if storage is None else 'rdb'}"
    args = [f"results_dir={results}", f"study.name={name}", f"study.n_trials={n_trials}",
            "study.progress_bar=false"]
    if storage is not None:
        args.append(f"study.storage={storage}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-m", "ipu_tune", *args], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n_workers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "database is locked" not in err + out
    state = study_state(results, name, storage)
    assert len(state["complete"]) == n_trials  # type: ignore[arg-type]
    assert len(state["numbers"]) == len(set(state["numbers"]))  # type: ignore[arg-type]
    assert not state["running"]
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]


@pytest.mark.slow
@pytest.mark.parametrize("n_workers", [3, 4])
def test_workers_on_the_default_storage(tmp_path: Path, n_workers: int) -> None:
    _workers(tmp_path, n_workers, 40, None)


@pytest.mark.slow
@pytest.mark.parametrize("n_workers", [3, 4])
def test_workers_on_postgresql(tmp_path: Path, pg_url: str, n_workers: int) -> None:
    _workers(tmp_path, n_workers, 40, pg_url)


@pytest.mark.slow
def test_workers_option_runs_processes_on_one_machine(tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", "study.name=pool",
         "study.n_trials=60", "study.workers=3", "study.progress_bar=false"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    state = study_state(results, "pool")
    assert len(state["complete"]) == 60  # type: ignore[arg-type]
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
    study = state["study"]
    done = study.get_trials(states=(TrialState.COMPLETE,))  # type: ignore[attr-defined]
    # A trial a worker created after the last slot was taken is failed as surplus, untagged.
    workers = {t.user_attrs["worker"] for t in done}
    assert len(workers) > 1, "trials should come from several processes"
