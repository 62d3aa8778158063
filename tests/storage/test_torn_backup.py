"""The bytes a torn journal's repair cuts are kept by the one writer: never written through a
symlink (or onto anything else) already at the backup's name, and the journal is then left
as it was."""

from __future__ import annotations

import os
import time
from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import open_storage, resolve_storage


def test_a_symlink_at_the_backup_name_is_refused_and_the_journal_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="s", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    journal = Path(target.location)
    torn = journal.read_bytes() + b'{"op_code": 4, "worker_id": "x", "sta'
    journal.write_bytes(torn)
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    monkeypatch.setattr(time, "strftime", lambda *_: "20260101T000000Z")
    (tmp_path / f"{journal.name}.torn-20260101T000000Z-{os.getpid()}").symlink_to(notes)
    with pytest.raises(IpuTuneError, match="exists and is a symlink"):
        open_storage(target)
    assert notes.read_text() == "keep me"
    assert journal.read_bytes() == torn
