"""The journal writes a finished trial in one durable append; `study.storage=memory` is explicit."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ipu_tune.records import fail_trial
from ipu_tune.storage import BatchedJournalStorage, open_storage, resolve_storage
from tests.conftest import run_cli


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def _study(tmp_path: Path) -> tuple[optuna.Study, Path, BatchedJournalStorage]:
    target = resolve_storage(None, str(tmp_path))
    storage = open_storage(target)
    assert isinstance(storage, BatchedJournalStorage)
    study = optuna.create_study(study_name="b", storage=storage,
                                sampler=optuna.samplers.RandomSampler(seed=1))
    return study, Path(target.location), storage


def test_a_finished_trial_is_two_appends_and_one_fsync(tmp_path: Path) -> None:
    study, journal, storage = _study(tmp_path)
    lines, syncs = _lines(journal), storage.fsyncs
    trial = study.ask()
    for name in "abcd":
        trial.suggest_float(name, 0, 1)
    trial.set_user_attr("plan", "{}")
    trial.set_constraint("memory", -1.0)
    assert (_lines(journal), storage.fsyncs) == (lines + 1, syncs)  # the creation, unsynced
    study.tell(trial, 0.5)
    assert storage.fsyncs == syncs + 1  # params, attributes and result: one fsync'd append
    assert _lines(journal) == lines + 1 + 4 + 2 + 1
    again = optuna.load_study(study_name="b", storage=open_storage(
        resolve_storage(None, str(tmp_path)))).trials[0]
    assert again.state == TrialState.COMPLETE and set(again.params) == set("abcd")
    assert again.user_attrs == {"plan": "{}"} and again.constraints == {"memory": -1.0}


def test_tell_returns_a_plain_frozen_trial_the_caller_may_change(tmp_path: Path) -> None:
    # `Study.tell` returns a deep copy of the trial it reads back; this storage has that copy
    # share the immutable distributions: the copy must still be a FrozenTrial equal to the
    # stored trial, and changing it must leave the stored trial as it was.
    study, _, _ = _study(tmp_path)
    trial = study.ask()
    trial.suggest_float("x", 0, 1)
    trial.suggest_categorical("c", ["a", "b"])
    trial.set_user_attr("nested", {"list": [1, 2]})
    trial.set_constraint("memory", -1.0)
    told = study.tell(trial, 0.5)
    stored = study.get_trials(deepcopy=False)[0]
    assert type(told) is optuna.trial.FrozenTrial and told == stored
    told.user_attrs["nested"]["list"].append(3)
    told.params["x"] = 2.0
    told.values[0] = 9.0
    told.distributions.pop("c")
    again = study.get_trials(deepcopy=False)[0]
    assert again.user_attrs == {"nested": {"list": [1, 2]}}
    assert again.params["x"] != 2.0 and again.values == [0.5] and "c" in again.distributions


def test_held_writes_are_read_back_before_tell_and_absent_from_the_file(tmp_path: Path) -> None:
    study, _, _ = _study(tmp_path)
    trial = study.ask()
    x = trial.suggest_float("x", 0, 1)
    trial.set_user_attr("k", 1)
    mine = study.get_trials(deepcopy=False)[0]
    assert mine.params == {"x": x} and mine.user_attrs == {"k": 1}
    other = optuna.load_study(study_name="b", storage=open_storage(
        resolve_storage(None, str(tmp_path)))).trials[0]
    assert other.state == TrialState.RUNNING and other.params == {} and other.user_attrs == {}


def test_failing_another_workers_trial_is_written_at_once(tmp_path: Path) -> None:
    study, _, _ = _study(tmp_path)
    study.ask()  # held by this storage; another one recovers it
    target = resolve_storage(None, str(tmp_path))
    storage = open_storage(target)
    other = optuna.load_study(study_name="b", storage=storage)
    assert fail_trial(storage, other, other.trials[0], "worker died: test")
    seen = optuna.load_study(study_name="b", storage=open_storage(target)).trials[0]
    assert seen.state == TrialState.FAIL
    assert seen.system_attrs["fail_reason"] == "worker died: test"


def test_memory_storage_is_explicit_and_says_so_once(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert resolve_storage(None, str(tmp_path)).kind == "journal"  # never the default
    target = resolve_storage("memory", str(tmp_path))
    assert target.kind == "memory" and target.export_tag == "memory"
    storage = open_storage(target)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be resumed" in err[0]
    assert isinstance(storage, optuna.storages.InMemoryStorage)
    assert list(tmp_path.iterdir()) == []  # nothing kept on disk


def test_memory_storage_with_two_workers_is_one_line(tmp_path: Path) -> None:
    done = run_cli(["study.storage=memory", "study.workers=2", f"results_dir={tmp_path}/r",
                    "study.n_trials=3"], cwd=tmp_path)
    assert done.returncode != 0
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("ipu-tune: error: study.workers=2: study.storage=memory")
    assert "Traceback" not in done.stderr


def test_a_full_disk_mid_append_leaves_no_torn_record(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Half of a trial's append written, then ENOSPC: the half is cut (the next append of any
    worker would fuse with it into a bad line in the middle), and the error names the file."""
    import errno
    import os

    study, journal, _ = _study(tmp_path)
    trial = study.ask()
    trial.suggest_float("x", 0, 1)
    before = journal.read_bytes()
    real = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError) as raised:
        study.tell(trial, 0.5)
    monkeypatch.setattr(os, "write", real)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(journal)
    assert journal.read_bytes() == before
    again = optuna.load_study(study_name="b", storage=open_storage(
        resolve_storage(None, str(tmp_path))))
    assert [t.state for t in again.trials] == [TrialState.RUNNING]


def test_a_writer_killed_mid_write_leaves_no_torn_record_in_the_middle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A worker SIGKILLed inside its `write` leaves part of a record while the others run on:
    the next append, of any process, cuts it first, so the journal stays one record a line."""
    study, journal, _ = _study(tmp_path)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    torn = b'{"op_code":5,"worker_id":"dead","trial_id":1,"user_attr":{"plan":"{\\"a'
    with journal.open("ab") as f:  # what the killed worker's write got to the file
        f.write(torn)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    fresh = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal)))
    assert len(optuna.load_study(study_name="b", storage=fresh).trials) == 4
    backups = list(tmp_path.glob(f"{journal.name}.torn-*"))
    assert [b.read_bytes() for b in backups] == [torn]
    assert "a writer killed mid-write" in capsys.readouterr().err
