"""A study's own SQLite database (`study.storage=sqlite:///FILE`) with a page damaged past the
ones its open reads: every command that opens it ends in one line naming the file, SQLite's
words and how to get a whole file back, exit 2, as a damaged results table does. Before, the
first query to read the page ended in a traceback (`StorageInternalError`, caused by
`sqlite3.DatabaseError: database disk image is malformed`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipu_tune.errors import DATABASE_FILE
from ipu_tune.storage import damaged_database
from tests.conftest import run_cli

_PAGE = 4096
_DB = "sq/s.db"
_STUDY = "mnist_cnn-mk2x2-throughput"
_TUNE = ["model=mnist_cnn", "study.n_trials=5", "study.progress_bar=false",
         f"study.storage=sqlite:///{_DB}", "results_dir=sq"]


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose study database holds one finished study of 5 trials."""
    where = tmp_path_factory.mktemp("sound")
    done = run_cli(_TUNE, where)
    assert done.returncode == 0, done.stderr
    return where


COMMANDS = {
    "export": ["export", _STUDY, "--storage", f"sqlite:///{_DB}", "--results-dir", "sq",
               "--output", "sq/out.csv"],
    "studies": ["studies", "--storage", f"sqlite:///{_DB}"],
    "resume": _TUNE,
}


# Page 6: a page of Optuna's tables a query reads after the open; page 4: one the open itself
# reads (Optuna checks its schema), where the error came out as "cannot open (An exception is
# raised during the commit ...)".
@pytest.mark.parametrize("page", [6, 4])
@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_damaged_page_of_the_study_database_is_one_line(
        sound: Path, tmp_path: Path, args: list[str], page: int) -> None:
    shutil.copytree(sound / "sq", tmp_path / "sq")
    with (tmp_path / _DB).open("r+b") as f:
        f.seek((page - 1) * _PAGE)
        f.write(b"\xff" * _PAGE)
    done = run_cli(args, tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    # Found on opening, the line names the option that gave the file; later, the file.
    key = "study.storage" if args is _TUNE else "--storage"
    head = f"SQLite database '{_DB}'" if page == 6 else f"{key}='sqlite:///{_DB}'"
    assert lines == [
        f"ipu-tune: error: {head}: damaged (database disk image is "
        "malformed), so its studies cannot be read; allowed: the file restored from a backup, "
        f"or what is left of it saved to a new file (sqlite3 {_DB} \".recover\" | sqlite3 "
        "NEW.db) and NEW.db given as the storage (sqlite:///NEW.db)"]


def test_damage_is_told_only_for_sqlite_s_words_and_names_the_tagged_file() -> None:
    cause = Exception("database disk image is malformed")
    wrapper = RuntimeError("An exception is raised during the commit.")
    wrapper.__cause__ = cause
    assert "the study's SQLite database: damaged" in (damaged_database(wrapper) or "")
    setattr(cause, DATABASE_FILE, "my dir/s.db")
    assert "sqlite3 'my dir/s.db' \".recover\"" in (damaged_database(wrapper) or "")
    assert damaged_database(RuntimeError("disk I/O error")) is None
