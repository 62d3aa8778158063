"""The bytes a torn journal's repair cuts are kept by the one writer: never written through a
symlink (or onto anything else) already at the backup's name, and the journal is then left
as it was."""

from __future__ import annotations

import os
import time
from pathlib import Path

import optuna
import pytest

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
    first = tmp_path / f"{journal.name}.torn-20260101T000000Z-{os.getpid()}"
    first.symlink_to(notes)
    open_storage(target)
    assert notes.read_text() == "keep me" and first.is_symlink()
    assert (tmp_path / f"{first.name}-2").read_bytes() == torn[len(journal.read_bytes()):]
    assert journal.read_bytes() + (tmp_path / f"{first.name}-2").read_bytes() == torn


def test_two_repairs_in_one_second_keep_both_backups(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every append repairs a torn tail first, so one process may repair twice in a second:
    the second backup gets a name of its own, and both keep what they cut."""
    target = resolve_storage(None, str(tmp_path))
    storage = open_storage(target)
    study = optuna.create_study(study_name="s", storage=storage)
    journal = Path(target.location)
    monkeypatch.setattr(time, "strftime", lambda *_: "20260101T000000Z")
    cuts = [b'{"op_code": 4, "worker_id": "x", "sta', b'{"op_code": 5, "wor']
    for cut in cuts:
        with journal.open("ab") as f:
            f.write(cut)
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    backups = sorted(tmp_path.glob(f"{journal.name}.torn-*"), key=lambda p: len(p.name))
    assert [b.read_bytes() for b in backups] == cuts
