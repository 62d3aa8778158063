"""A database URL is checked before a driver sees it (`ipu_tune.storage._url`): a password
with a bare `@`, a `postgres://` scheme and a damaged SQLite file are bad input said in one
line with what is allowed, never a server "to wait for", and no piece of the password shows.
Checked against a real server that asks for the password."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from ipu_tune._redact import redact
from tests._pg import pg_bin_dir, postgres_server
from tests.conftest import run_cli

_PASSWORD = "S3cr3t@P"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """HOST:PORT of a server whose user postgres logs in with `_PASSWORD` only."""
    if pg_bin_dir() is None:
        pytest.fail("PostgreSQL server binaries are missing: apt-get install postgresql")
    with postgres_server(password=_PASSWORD) as url:
        yield url.split("@", 1)[1].split("/", 1)[0]


def _shows(text: str, piece: str) -> bool:
    """Whether `piece` stands in `text` as a word of its own (not inside `Postgres`)."""
    return re.search(rf"(?<![\w.%-]){re.escape(piece)}(?![\w.%-])", text) is not None


@pytest.mark.parametrize(("login", "pieces"), [
    ("postgres:S3cr3t@P@{server}", ["S3cr3t@P", "S3cr3t", "P"]),
    ("postgres:ab@cd?host=TOP%2FSECRET@{server}", ["TOP/SECRET", "TOP%2FSECRET", "cd", "TOP"]),
    ("postgres:ab@{server}/ipu_tune?&TOPSECRET@h", ["TOPSECRET"]),
])
def test_a_bare_at_in_the_password_is_bad_input_saying_to_percent_encode(
        login: str, pieces: list[str], server: str, tmp_path: Path) -> None:
    url = "postgresql://" + login.format(server=server) + ("" if "?" in login else "/ipu_tune")
    for args in (["studies", "--storage", url],
                 [f"study.storage='{url}'", "model=mnist_cnn", "study.n_trials=1"]):
        done = run_cli(args, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
        assert "'@' as %40" in done.stderr and "allowed:" in done.stderr, done.stderr
        assert "reachable" not in done.stderr
        assert not [p for p in pieces if _shows(done.stderr + done.stdout, p)], done.stderr
    assert not (tmp_path / "results").exists()  # nothing made for a refused URL


def test_the_same_password_percent_encoded_logs_in(server: str, tmp_path: Path) -> None:
    done = run_cli(["studies", "--storage", f"postgresql://postgres:S3cr3t%40P@{server}/ipu_tune"],
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_what_the_driver_says_of_a_split_password_is_masked(server: str) -> None:
    """The driver's own message for the URL the check refuses: its pieces of the password
    (as typed and decoded, however short) are masked by the redaction every message uses."""
    from sqlalchemy import create_engine

    for url, pieces in ((f"postgresql+psycopg://postgres:S3cr3t@P@{server}/ipu_tune", ["P"]),
                        (f"postgresql+psycopg://postgres:ab@cd?host=TOP%2FSECRET@{server}",
                         ["TOP", "SECRET", "TOP/SECRET"])):
        with pytest.raises(Exception) as info:
            create_engine(url, connect_args={"connect_timeout": 5}).connect().close()
        said = str(info.value).splitlines()[0]
        assert any(_shows(said, p) for p in pieces), said  # the driver does echo them
        shown = redact(said, url)
        assert not [p for p in pieces if _shows(shown, p)], shown


@pytest.mark.parametrize("scheme", ["postgres", "postgres+psycopg", "pgsql"])
def test_an_unknown_scheme_names_the_allowed_ones(scheme: str, tmp_path: Path) -> None:
    done = run_cli(["studies", "--storage", f"{scheme}://postgres:pw@127.0.0.1/db"],
                   cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "postgresql://USER@HOST/DB" in done.stderr and "allowed:" in done.stderr
    assert "Can't load plugin" not in done.stderr and "pw" not in done.stderr
    if scheme.startswith("postgres"):
        assert "write postgresql://" in done.stderr


@pytest.mark.parametrize(("scheme", "said"), [
    ("mysql", "its driver (mysql: MySQLdb) is not installed"),
    ("mssql+pyodbc", "its driver (mssql+pyodbc: pyodbc) is not installed"),
    ("postgresql+pg8000", "its driver (postgresql+pg8000: pg8000) is not installed"),
    # Optuna's sessions are synchronous: "server unreachable, run again" helped nothing.
    ("postgresql+psycopg_async", "postgresql+psycopg_async is an asyncio driver, which "
     "Optuna's storage cannot use")])
def test_a_scheme_whose_driver_cannot_serve_names_the_allowed_ones(
        scheme: str, said: str, tmp_path: Path) -> None:
    """SQLAlchemy knows the scheme, its driver is not here: Optuna's "Failed to import DB
    access module" named neither the driver nor what is allowed."""
    done = run_cli(["studies", "--storage", f"{scheme}://u:pw@127.0.0.1:5999/db"], cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert said in done.stderr, done.stderr
    assert "allowed: a journal file" in done.stderr and ":pw" not in done.stderr


def test_a_damaged_sqlite_file_says_so_and_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert run_cli(["model=mnist_cnn", "study.n_trials=1", "study.progress_bar=false",
                    f"study.storage=sqlite:///{db}"], cwd=tmp_path).returncode == 0
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])  # cut short: SQLite's "malformed"
    done = run_cli(["studies", "--storage", f"sqlite:///{db}"], cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"--storage='sqlite:///{db}': damaged (database disk image is malformed)" in (
        done.stderr) and "backup" in done.stderr and ".recover" in done.stderr, done.stderr
    assert db.read_bytes() == data[: len(data) // 2]  # left as it was, for a recovery


@pytest.mark.parametrize("password", ["failed", "ion", "p%40ss%2Fw%3Ard", "x"])
def test_a_refused_password_shows_in_no_form_and_the_servers_words_stay_whole(
        password: str, server: str, tmp_path: Path) -> None:
    """The server refuses these passwords: its message names no part of them as a word, and
    none of its words is cut (`connect***` of a password `ion`)."""
    url = f"postgresql://postgres:{password}@{server}/ipu_tune"
    done = run_cli(["studies", "--storage", url], cwd=tmp_path)
    said = done.stderr + done.stdout
    assert done.returncode != 0 and "password authentication" in said, said
    assert "connection to server at" in said, said
    assert not re.search(r"\w\*\*\*|\*\*\*\w", said), said  # no word cut
    decoded = password.replace("%40", "@").replace("%2F", "/").replace("%3A", ":")
    pieces = {password, decoded, *re.split(r"[@/:]", decoded)}
    assert not [p for p in pieces if _shows(said, p)], said


def test_a_full_disk_on_the_server_names_the_database_without_its_password(server: str) -> None:
    """PostgreSQL words a full disk with a file of its own data folder ("could not extend file
    ...: No space left on device", class disk_full): the line names the study's database by
    its URL, the password masked. The server raises that error class itself here."""
    from sqlalchemy import text

    from ipu_tune.errors import disk_fault
    from ipu_tune.storage import StorageTarget, open_storage

    url = f"postgresql://postgres:{quote(_PASSWORD, safe='')}@{server}/ipu_tune"
    storage = open_storage(StorageTarget("rdb", url, "", "results"))
    full = ("DO $$ BEGIN RAISE EXCEPTION 'could not extend file \"base/16384/16390\": No space "
            "left on device' USING ERRCODE = 'disk_full'; END $$")
    with pytest.raises(Exception) as err, storage.engine.connect() as conn:  # type: ignore[attr-defined]
        conn.execute(text(full))
    line = disk_fault(err.value) or ""
    assert line == (f"disk error writing 'postgresql://postgres:***@{server}/ipu_tune': "
                    "no space left on device")
    assert not _shows(line, _PASSWORD)
    storage.engine.dispose()  # type: ignore[attr-defined]
