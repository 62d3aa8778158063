"""A worker SIGKILLed between its trial's two journal writes (the creation, and the result that
carries its parameters and attributes) leaves a RUNNING trial without parameters; the next run
fails it, retries an enqueued plan, and finishes the budget with nothing finished lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.tuner._inspect import study_state

NAME = "between"

# Claims a trial exactly as a worker does (claim lock, its running file, ask), samples every
# parameter and sets an attribute (held in memory until the result), then dies.
_VICTIM = """
import json, os, signal, sys
import optuna
from ipu_tune.storage import open_storage, resolve_storage
results, name, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
target = resolve_storage(None, results)
study = optuna.load_study(study_name=name, storage=open_storage(target))
model = study.get_trials(deepcopy=False)[0]
if plan:
    study.enqueue_trial(plan)
claims = target.claims
with claims.claiming():
    running = claims.running_file("victim")
    trial = study.ask(fixed_distributions=model.distributions)
    running.hold(trial.number)
trial.set_user_attr("sampled", True)
print(trial.number, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _main(results: Path, n_trials: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
         f"study.n_trials={n_trials}", "study.progress_bar=false"],
        cwd=results.parent, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )


def _kill_between_writes(results: Path, plan: dict[str, object]) -> int:
    victim = subprocess.run(
        [sys.executable, "-c", _VICTIM, str(results), NAME, json.dumps(plan)],
        cwd=results.parent, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )
    assert victim.returncode == -signal.SIGKILL, victim.stderr
    return int(victim.stdout.split()[0])


@pytest.mark.slow
@pytest.mark.parametrize("enqueued", [False, True], ids=["sampled", "enqueued"])
def test_kill_between_the_two_writes_fails_and_retries_the_trial(
        tmp_path: Path, enqueued: bool) -> None:
    results = tmp_path / "results"
    first = _main(results, 6)
    assert first.returncode == 0, first.stderr
    before = study_state(results, NAME)
    plan = dict(before["study"].trials[0].params) if enqueued else {}  # type: ignore[attr-defined]
    killed = _kill_between_writes(results, plan)

    # What the kill left in the journal: the claimed trial, without what it held in memory.
    state = study_state(results, NAME)
    assert state["running"] == {killed}
    trial = state["study"].trials[killed]  # type: ignore[attr-defined]
    assert trial.params == {} and "sampled" not in trial.user_attrs
    assert (trial.system_attrs.get("fixed_params") == plan) if enqueued else True

    total = len(before["complete"]) + 3  # type: ignore[arg-type]
    done = _main(results, total)
    assert done.returncode == 0, done.stderr
    after = study_state(results, NAME)
    study = after["study"]
    failed = study.trials[killed]  # type: ignore[attr-defined]
    assert failed.state.name == "FAIL"
    assert failed.system_attrs["fail_reason"].startswith("worker died")
    retries = [t for t in study.trials if t.user_attrs.get("retry_of") == killed]  # type: ignore[attr-defined]
    if enqueued:
        assert len(retries) == 1 and retries[0].params == plan
        assert retries[0].number in after["complete"]  # type: ignore[operator]
    else:
        assert retries == []  # nothing to repeat: a new trial takes its budget slot
    assert before["complete"] <= after["complete"]  # type: ignore[operator]
    assert len(after["complete"]) == total  # type: ignore[arg-type]
    assert not after["running"] and not after["waiting"]
    assert after["rows"] == sorted(after["complete"])  # type: ignore[type-var]
