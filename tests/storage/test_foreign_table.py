"""A results table that is not ipu-tune's (other columns, no unique (study, trial_number), a
trigger, a view, a constraint a row breaks) ended the tuner and `export` with a driver's
traceback. In a file of ipu-tune's own (results.db, results@<tag>.db) it is moved aside with
one line and rebuilt; in a study database (SQLite or PostgreSQL) nothing is dropped or moved:
one line says what is wrong."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import ResultsStore
from tests.cli._one_line import exit_line

ROW = {"study": "s", "trial_number": 0, "state": "COMPLETE", "extra": {"k": 1}}

FOREIGN = {
    "other columns": "CREATE TABLE ipu_tune_results (x INT)",
    "a trigger": "CREATE TABLE ipu_tune_results (id INTEGER PRIMARY KEY, study TEXT NOT NULL, "
                 "trial_number INT NOT NULL, state TEXT NOT NULL, UNIQUE (study, trial_number));"
                 "CREATE TRIGGER tr BEFORE INSERT ON ipu_tune_results BEGIN "
                 "SELECT raise(abort, 'nope'); END",
    "no unique key": "CREATE TABLE ipu_tune_results (id INTEGER PRIMARY KEY, study TEXT, "
                     "trial_number INT, state TEXT)",
    "a view": "CREATE VIEW ipu_tune_results AS SELECT 1 AS x",
    "a check": "CREATE TABLE ipu_tune_results (id INTEGER PRIMARY KEY, study TEXT NOT NULL, "
               "trial_number INT NOT NULL, state TEXT CHECK (state = 'X'), "
               "UNIQUE (study, trial_number))",
    "a column of its own": "CREATE TABLE ipu_tune_results (id INTEGER PRIMARY KEY, study TEXT, "
                           "trial_number INT, state TEXT, mine TEXT NOT NULL, "
                           "UNIQUE (study, trial_number))",
}


def _make(path: Path, sql: str, study_db: bool = False) -> None:
    with sqlite3.connect(path) as conn:
        if study_db:  # Optuna's schema: a study storage, never ipu-tune's to move
            optuna.create_study(study_name="s", storage=f"sqlite:///{path}")
        conn.executescript(sql)


@pytest.mark.parametrize("sql", FOREIGN.values(), ids=FOREIGN.keys())
@pytest.mark.parametrize("name", ["results.db", "results@0a1b2c.db"])
def test_a_foreign_table_in_ipu_tunes_file_is_moved_aside_and_rebuilt(
        sql: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    _make(path, sql)
    store = ResultsStore(f"sqlite:///{path}")
    try:
        store.insert([ROW])
        assert [r["trial_number"] for r in store.rows("s")] == [0]
    finally:
        store.close()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not ipu-tune's" in err and ".bad-" in err
    aside = [p for p in tmp_path.iterdir() if ".bad-" in p.name and not p.name.endswith(
        ("-wal", "-shm"))]
    assert len(aside) == 1
    with sqlite3.connect(aside[0]) as conn:  # kept as it was
        assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'ipu_tune_results'"
                            ).fetchone() is not None


@pytest.mark.parametrize("sql", FOREIGN.values(), ids=FOREIGN.keys())
def test_a_foreign_table_in_a_study_database_is_one_line_and_left_alone(
        sql: str, tmp_path: Path) -> None:
    path = tmp_path / "studies.db"
    _make(path, sql, study_db=True)
    before = _schema(path)
    with pytest.raises(IpuTuneError, match=r"^results store '.*studies\.db': its table "
                       r"ipu_tune_results is not ipu-tune's \(.+\); allowed: ") as info:
        ResultsStore(f"sqlite:///{path}")
    assert "\n" not in str(info.value)
    assert _schema(path) == before  # no column added, nothing dropped
    assert not [p for p in tmp_path.iterdir() if ".bad-" in p.name]


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT name, sql FROM sqlite_master").fetchall(),
                      key=str)


def test_a_value_that_is_no_json_reads_as_unknown(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    store = ResultsStore(f"sqlite:///{path}")
    try:
        store.insert([ROW])
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE ipu_tune_results SET extra = 'not json{'")
        assert store.rows("s")[0]["extra"] is None
    finally:
        store.close()


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A database of its own on the test server: the other tests' table stays as it is."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("DROP DATABASE IF EXISTS foreign_table"))
        conn.execute(sqlalchemy.text("CREATE DATABASE foreign_table"))
    url = str(sqlalchemy.engine.make_url(pg_url).set(database="foreign_table")
              .render_as_string(hide_password=False))
    try:
        yield url
    finally:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("DROP DATABASE IF EXISTS foreign_table WITH (FORCE)"))
        engine.dispose()


@pytest.mark.parametrize("sql", [
    "CREATE TABLE ipu_tune_results (x INT)",
    "CREATE TABLE ipu_tune_results (id SERIAL PRIMARY KEY, study TEXT NOT NULL, trial_number "
    "INT NOT NULL, state TEXT NOT NULL, UNIQUE (study, trial_number)); CREATE FUNCTION nope() "
    "RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'nope'; END $$ LANGUAGE plpgsql; CREATE "
    "TRIGGER tr BEFORE INSERT ON ipu_tune_results FOR EACH ROW EXECUTE FUNCTION nope()",
], ids=["other columns", "a trigger"])
def test_a_foreign_table_on_a_server_is_one_line_and_never_dropped(pg_db: str, sql: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(pg_db)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
        with pytest.raises(IpuTuneError, match=r"its table ipu_tune_results is not ipu-tune's"):
            ResultsStore(pg_db)
        with engine.connect() as conn:
            columns = {c["name"] for c in sqlalchemy.inspect(conn).get_columns("ipu_tune_results")}
        assert columns == ({"x"} if "(x INT)" in sql else {"id", "study", "trial_number",
                                                         "state"})  # nothing added or dropped
    finally:
        engine.dispose()


def test_export_of_a_study_beside_a_foreign_table_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command's whole path: a trigger in the study database's table, no traceback."""
    path = tmp_path / "studies.db"
    _make(path, FOREIGN["a trigger"], study_db=True)
    code, err = exit_line(["export", "s", "--storage", f"sqlite:///{path}", "--results-dir",
                           str(tmp_path), "--output", str(tmp_path / "t.csv")], capsys)
    assert code in (1, 2) and err.startswith("ipu-tune: error: ")
    assert not (tmp_path / "t.csv").exists()


_OPENER = """
import sys
from ipu_tune.storage import ResultsStore
for i in range(30):
    store = ResultsStore(sys.argv[1])
    store.insert([{"study": sys.argv[2], "trial_number": i, "state": "COMPLETE"}])
    store.close()
"""


def test_workers_opening_the_table_together_wait_their_turn(tmp_path: Path) -> None:
    """The check's rolled-back row takes the write lock first: a reader's snapshot that must
    become a writer fails at once ("database is locked") instead of waiting."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    url = f"sqlite:///{tmp_path / 'results.db'}"
    procs = [subprocess.Popen([sys.executable, "-c", _OPENER, url, f"s{i}"],
                              env={**os.environ, "PYTHONPATH": str(REPO)},
                              stderr=subprocess.PIPE, text=True) for i in range(6)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    store = ResultsStore(url)
    try:
        assert len(store.rows()) == 180
    finally:
        store.close()
