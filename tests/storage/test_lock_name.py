"""ipu-tune's journal lock is not Optuna's: an Optuna client (optuna-dashboard) takes and
deletes `<journal>.lock` (`JournalFileOpenLock`, stale after 30 s), which must leave
ipu-tune's flock alone; an old study's `<journal>.lock` breaks nothing."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileOpenLock

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import FlockLock, open_storage, resolve_storage
from ipu_tune.storage._journal_lock import lock_fd, unlock_fd


def test_ipu_tunes_lock_and_optunas_are_two_files(tmp_path: Path) -> None:
    journal = str(tmp_path / "ipu_tune.journal")
    ours = FlockLock(journal)
    ours.acquire()
    try:
        theirs = JournalFileOpenLock(journal)
        assert theirs.acquire()  # not held by ipu-tune's lock: its own file
        theirs.release()  # deletes Optuna's file only
        held = Path(journal + ".ipu_tune-lock")
        assert held.exists()
        with pytest.raises(IpuTuneError, match="held by"):  # ipu-tune's flock still excludes
            lock_fd(str(held), "journal lock", timeout_s=0.05)
    finally:
        ours.release()
    fd = lock_fd(str(held), "journal lock", timeout_s=0.05)
    unlock_fd(fd)


def test_an_old_lock_file_is_left_as_it_is(tmp_path: Path) -> None:
    old = tmp_path / "ipu_tune.journal.lock"
    old.write_text(f"{12345:<20}\n")  # what an earlier ipu-tune left: its last holder's PID
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert old.read_text() == f"{12345:<20}\n"
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 2
