"""A SQLite URL naming a file that is no SQLite database: an Optuna journal, another file, or a
new file by a journal's name. Before, a journal was called a damaged database (to be mended with
`sqlite3 .recover`), and a new `sqlite:///DIR/ipu_tune.journal` was made a SQLite database, after
which DIR's default storage was refused as "not an Optuna journal". Now each is refused in one
line before anything is opened or written."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import open_storage, resolve_storage


def _journal(folder: Path) -> Path:
    storage = open_storage(resolve_storage(None, str(folder)))
    optuna.create_study(study_name="a", storage=storage).optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    return folder / "ipu_tune.journal"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b""
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("read_only", [False, True], ids=["tuner", "reading command"])
def test_a_sqlite_url_of_a_journal_is_refused_and_the_journal_left_alone(
        tmp_path: Path, read_only: bool) -> None:
    journal = _journal(tmp_path)
    before = _snapshot(tmp_path)
    target = resolve_storage(f"sqlite:///{journal}", str(tmp_path))
    with pytest.raises(IpuTuneError) as err:
        open_storage(target, read_only=read_only)
    message = str(err.value)
    assert "\n" not in message and "is an Optuna journal, not a SQLite database" in message
    assert f"study.storage={journal}" in message and "left unset" in message
    assert ".recover" not in message
    assert _snapshot(tmp_path) == before
    again = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    assert len(optuna.load_study(study_name="a", storage=again).trials) == 2


def test_a_new_sqlite_file_by_a_journals_name_is_not_made(tmp_path: Path) -> None:
    default = tmp_path / "ipu_tune.journal"
    with pytest.raises(IpuTuneError, match="has a journal's name") as err:
        open_storage(resolve_storage(f"sqlite:///{default}", str(tmp_path)))
    assert "\n" not in str(err.value) and "nothing was written" in str(err.value)
    assert list(tmp_path.iterdir()) == []
    _journal(tmp_path)  # results_dir's default storage is still free to be made


def test_a_sqlite_url_of_another_file_is_refused_unchanged(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(IpuTuneError, match="is not a SQLite database") as err:
        open_storage(resolve_storage(f"sqlite:///{notes}", str(tmp_path)))
    assert "\n" not in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert notes.read_text() == "my notes\n"
