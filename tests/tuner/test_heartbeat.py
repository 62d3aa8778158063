"""PostgreSQL: a worker on another host that dies leaves no trial RUNNING forever. Optuna's
heartbeat (`heartbeat_interval`, `grace_period`, retry of stale trials) fails its trial after
the grace period and enqueues it again; the next run reaches the total.

The other host is real as far as the code can tell: the worker runs in its own UTS namespace
with another hostname (`unshare --uts`), so its PID means nothing here."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ipu_tune.records import TrialRecord
from ipu_tune.storage import HEARTBEAT_GRACE_S
from tests.conftest import REPO
from tests.tuner._inspect import study_state

NAME = "heartbeat"


def _args(results: Path, pg_url: str, n_trials: int) -> list[str]:
    return [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
            f"study.n_trials={n_trials}", f"study.storage={pg_url}", "study.progress_bar=false"]


def _running_elsewhere(results: Path, pg_url: str) -> list[int]:
    study = study_state(results, NAME, pg_url)["study"]
    return [t.number for t in study.get_trials(  # type: ignore[attr-defined]
        deepcopy=False, states=(TrialState.RUNNING,))
        if (TrialRecord.of(t).worker or "").startswith("otherhost:")]


@pytest.mark.slow
def test_a_dead_worker_on_another_host_is_retried(tmp_path: Path, pg_url: str) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a worker with its own hostname")
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stuck: list[int] = []
    for _ in range(5):  # kill it until a trial of it is left RUNNING (nearly always at once)
        other = subprocess.Popen(
            ["unshare", "--uts", "sh", "-c", 'hostname otherhost && exec "$@"', "sh",
             *_args(results, pg_url, 100_000)],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and other.poll() is None:
            time.sleep(0.05)
            try:
                seen = _running_elsewhere(results, pg_url)
            except Exception:  # the study is not created yet
                continue
            if seen:  # the worker is inside a trial: kill it there
                os.kill(other.pid, signal.SIGKILL)
                break
        other.kill()
        other.communicate()
        stuck = _running_elsewhere(results, pg_url)
        if stuck:
            break
    assert stuck, "could not leave a RUNNING trial behind"
    time.sleep(HEARTBEAT_GRACE_S + 1)  # its last heartbeat is now older than the grace period
    total = len(study_state(results, NAME, pg_url)["complete"]) + 5  # type: ignore[arg-type]
    resumed = subprocess.run(_args(results, pg_url, total), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    state = study_state(results, NAME, pg_url)
    # The dead worker's trial does not stay RUNNING forever (a "(0 run now)" stall).
    assert not state["running"]
    assert len(state["complete"]) == total  # type: ignore[arg-type]
    study = state["study"]
    for number in stuck:
        assert study.trials[number].state == TrialState.FAIL  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
def test_a_trial_claimed_and_never_beaten_again_is_failed_after_the_grace_period(
        pg_url: str) -> None:
    # A worker killed in a trial's first milliseconds, before its heartbeat loop ran once: the
    # claim's own first heartbeat is what lets Optuna find the trial stale.
    from ipu_tune.storage import open_storage, resolve_storage
    from ipu_tune.tuner._heartbeat import beating, fail_stale  # the unit under test

    storage = open_storage(resolve_storage(pg_url, "."))
    study = optuna.create_study(study_name="claimed", storage=storage)
    with beating(study, storage, "otherhost:1:1") as claimed:
        trial = study.ask()
        claimed(trial.number)
    # The loop has stopped, as a killed worker's would; its first beat was never taken.
    time.sleep(HEARTBEAT_GRACE_S + 1)
    fail_stale(study, storage)
    assert study.trials[0].state == TrialState.FAIL
    # As on a journal: the worker named (untagged here), and no plan drawn: nothing to retry.
    assert study.trials[0].system_attrs["fail_reason"] == "worker died: unrecorded"
    assert len(study.trials) == 1
