"""A worker SIGKILLed between asking for a trial and recording it in its claim file leaves that
file behind, unlocked, naming no trial or the one it ran before: the resume fails the RUNNING
trial as that dead worker's, not as one whose worker ended on an error, and removes the file."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import recover_stale_trials

_X = {"x": optuna.distributions.FloatDistribution(0, 1)}


def _state(tmp_path: Path, record: str | None) -> tuple[optuna.Study, int, Path]:
    """A study with one finished trial and one RUNNING one, and a dead worker's claim file
    holding `record` (None: no file): a file no process has locked is a dead worker's."""
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="s", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    running = study.ask(_X)
    folder = tmp_path / "ipu_tune.journal.claims.running"
    folder.mkdir(exist_ok=True)
    file = folder / "4242-0123456789ab"
    if record is not None:
        file.write_text(record)
    return study, running.number, file


@pytest.mark.parametrize("record", [
    "-\ns\nhost:4242:1\n",  # killed before its first trial was recorded
    "0\ns\nhost:4242:1\n",  # killed between its next ask and recording it: names trial 0
], ids=["no trial yet", "its previous trial"])
def test_a_dead_workers_file_without_the_trial_names_the_worker(
        tmp_path: Path, record: str) -> None:
    study, number, file = _state(tmp_path, record)
    target = resolve_storage(None, str(tmp_path))
    assert recover_stale_trials(study, study._storage, target.claims) == [number]
    trial = study.trials[number]
    assert trial.state == TrialState.FAIL
    assert trial.system_attrs["fail_reason"] == "worker died: host:4242:1"
    assert not file.exists()


def test_an_empty_dead_file_names_the_pid(tmp_path: Path) -> None:
    """A file made but never written (killed at once) still says a worker died."""
    study, number, file = _state(tmp_path, "")
    target = resolve_storage(None, str(tmp_path))
    assert recover_stale_trials(study, study._storage, target.claims) == [number]
    assert study.trials[number].system_attrs["fail_reason"] == "worker died: pid 4242"
    assert not file.exists()


def test_a_dead_file_of_another_study_is_not_this_ones(tmp_path: Path) -> None:
    study, number, file = _state(tmp_path, "-\nother\nhost:4242:1\n")
    target = resolve_storage(None, str(tmp_path))
    assert recover_stale_trials(study, study._storage, target.claims) == [number]
    assert study.trials[number].system_attrs["fail_reason"] == (
        "not stored: its worker ended on an error before storing it")
    assert file.exists()  # kept for the other study's recovery


def test_no_file_at_all_is_a_worker_that_ended_on_an_error(tmp_path: Path) -> None:
    study, number, _ = _state(tmp_path, None)
    target = resolve_storage(None, str(tmp_path))
    assert recover_stale_trials(study, study._storage, target.claims) == [number]
    assert study.trials[number].system_attrs["fail_reason"] == (
        "not stored: its worker ended on an error before storing it")


def test_a_new_workers_file_names_it_before_its_first_trial(tmp_path: Path) -> None:
    claims = resolve_storage(None, str(tmp_path)).claims
    with claims.claiming():
        running = claims.running_file("host:1:2", "s")
    try:
        assert Path(running.path).read_text() == "-\ns\nhost:1:2\n"
        assert claims.held("s") == ({}, {}, [])  # alive: nobody's to judge
    finally:
        running.close()


@pytest.mark.parametrize(("name", "text"), [("notes.txt", ""), ("4242-0123456789ab", "hello")])
def test_a_file_that_is_no_workers_record_stays(tmp_path: Path, name: str, text: str) -> None:
    study, number, file = _state(tmp_path, None)
    stray = file.with_name(name)
    stray.write_text(text)
    target = resolve_storage(None, str(tmp_path))
    assert recover_stale_trials(study, study._storage, target.claims) == [number]
    assert study.trials[number].system_attrs["fail_reason"] == (
        "not stored: its worker ended on an error before storing it")
    assert stray.read_text() == text
