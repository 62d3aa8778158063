"""The commands that read or write `results.db` on a file damaged past its header: before, the
tuner, `report` and `export` stopped with `results store ...: cannot open (database disk image
is malformed)`, exit 2; now each moves it aside with one line, rebuilds it from the studies
and carries on (`tests/storage/test_damaged_results.py` damages it every way SQLite reports)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli._one_line import exit_line
from tests.conftest import run_cli

NAME = "damaged"


def _tune(tmp_path: Path, n: int) -> tuple[int, str]:
    proc = run_cli(["model=mnist_cnn", f"study.name={NAME}", f"study.n_trials={n}",
                    "study.progress_bar=false", f"results_dir={tmp_path / 'results'}"],
                   cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stderr


def _damage(db: Path) -> None:
    """Bytes 100-4000 overwritten: SQLite's header stays, the schema's page does not."""
    with db.open("r+b") as f:
        f.seek(100)
        f.write(os.urandom(3900))


def _rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM ipu_tune_results").fetchone()[0])


def _said(err: str, db: Path) -> None:
    assert err.strip().count("\n") == 0, err
    assert err.startswith(f"ipu-tune: results table {str(db)!r} is damaged (database disk "
                          "image is malformed); moved it to "), err
    assert err.strip().endswith("its rows are rebuilt from the studies"), err


def test_tuning_report_and_export_rebuild_a_damaged_results_db(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "results" / "results.db"
    assert _tune(tmp_path, 3)[0] == 0
    _damage(db)
    code, err = _tune(tmp_path, 4)
    assert code == 0, err
    _said(err, db)
    assert _rows(db) == 4
    for argv in (["report", NAME], ["export", NAME, "--output", str(tmp_path / "t.csv")]):
        _damage(db)
        code, err = exit_line([*argv, "--results-dir", str(db.parent)], capsys)
        assert code == 0, err
        _said(err, db)
        assert _rows(db) == 4
    assert (tmp_path / "t.csv").read_text().count("\n") == 5
    assert len([p for p in db.parent.iterdir() if p.name.startswith("results.db.bad-")
                and not p.name.endswith(("-wal", "-shm"))]) == 3
