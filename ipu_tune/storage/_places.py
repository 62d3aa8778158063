"""The files a storage keeps on this machine's disk: checked before any is made, and those an
open that failed made removed again.

A journal, a SQLite database and the results table (a journal's in results_dir) are made by
the first open; the results table after the journal. A place that cannot hold one (a folder of
its name, a path SQLite cannot open) must be refused before the journal is made, and an open
that fails on the disk (a file-size limit) must not leave empty files behind.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ipu_tune._own_files import CLAIMS_RUNNING, DEFAULT_JOURNAL, OWN_SUFFIXES, SQLITE_COMPANIONS
from ipu_tune.errors import DATABASE_FILE, bad_value
from ipu_tune.files import NOT_PSEUDO, inside, on_pseudo_filesystem
from ipu_tune.storage._results_table import sqlite_path
from ipu_tune.storage._torn import begins_as_journal

__all__ = [
    "SQLITE_MAX_PATH", "check_links", "check_sqlite_file", "check_storage_places", "connect_url",
    "database_file", "name_errors", "removing_new_database", "removing_new_files", "storage_files",
]

class StorageTarget(Protocol):
    """What these checks read of `ipu_tune.storage.StorageTarget` (which opens through them)."""

    @property
    def kind(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def results_url(self) -> str: ...
    @property
    def results_dir(self) -> str: ...
    @property
    def given(self) -> bool: ...
    @property
    def key(self) -> str: ...
    @property
    def keys(self) -> tuple[str, str]: ...

    @property
    def display(self) -> str: ...


# SQLite's longest file name (SQLITE_MAX_PATHNAME, in bytes, once made absolute): a longer one
# is "unable to open database file" after the journal and lock files were made.
SQLITE_MAX_PATH = 512


def database_file(url: str) -> Path | None:
    """The file of a SQLite URL as the OS finds it (its folder's symlinks and `..` resolved;
    `..` above / stays at /), None for a server or a database in memory. SQLite reads `..`
    by the letters (above / it cannot open the file): it is given this path instead."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(str(parsed.database))
    return Path(os.path.realpath(path.parent)) / path.name


def name_errors(engine: Any, file: str) -> None:
    """Tag every error of `engine` with its database (`errors.DATABASE_FILE`): a SQLite file's
    path, a server's URL without its password. SQLite words a full disk or a file-size limit
    without a path ("disk I/O error"), PostgreSQL names a file of its own data folder, and the
    command's one line (`errors.disk_fault`, also in a worker's and a failed trial's reason)
    must name the database, as a journal's error names its file, wherever it is caught."""
    from sqlalchemy import event

    def tag(context: Any) -> None:
        for exc in (context.sqlalchemy_exception, context.original_exception):
            if exc is not None:
                setattr(exc, DATABASE_FILE, file)

    event.listen(engine, "handle_error", tag)


def connect_url(url: str) -> str:
    """`url` with a SQLite file named as `database_file` finds it (else as it is)."""
    from sqlalchemy.engine import make_url

    file = database_file(url)
    if file is None:
        return url
    return str(make_url(url).set(database=str(file)).render_as_string(hide_password=False))


def storage_files(target: StorageTarget) -> list[tuple[str, Path]]:
    """(what, path) of each file the storage keeps on this disk: its journal or SQLite
    database, and its results table; none for a server or a study in memory."""
    out: list[tuple[str, Path]] = []
    if target.kind == "journal":
        out.append(("journal", Path(target.location)))
    elif target.kind == "rdb" and (db := database_file(target.location)) is not None:
        out.append(("SQLite database", db))
    table = sqlite_path(target.results_url)
    if target.kind != "memory" and table is not None and all(Path(table) != p for _, p in out):
        out.append(("results table", Path(table)))
    return out


def _given(target: StorageTarget) -> str:
    """The value the user gave: the storage, or the results folder its default journal is in."""
    return target.display if target.given else target.results_dir


def _claims_folder(path: Path) -> Path | None:
    """The workers' claims folder of a storage (`<storage>.claims.running`) that `path` is or
    lies in, as the OS finds it."""
    resolved = Path(os.path.realpath(path))
    return next((p for p in (resolved, *resolved.parents) if p.name.endswith(CLAIMS_RUNNING)),
                None)


def _check_not_in_claims(target: StorageTarget) -> None:
    """Refuse results_dir or a storage file in a storage's claims folder: every file there is
    a worker's record, which recovery reads, and the folder holds nothing else."""
    places = [(target.keys[1], target.results_dir, Path(target.results_dir))
              ] if target.results_dir else []
    places += [(target.key, _given(target), path.parent) for _, path in storage_files(target)]
    for key, given, folder in places:
        claims = _claims_folder(folder)
        if claims is not None:
            raise bad_value(key, given, f"{str(folder)!r} is in {str(claims)!r}, the folder "
                            "of a storage's workers' claims; allowed: a folder outside it")


def check_links(target: StorageTarget) -> None:
    """Refuse a storage file, or a lock, claim or SQLite file beside it, that is in
    results_dir but resolves outside it (a symlink): everything written there stays there,
    as for a study's export folder. A storage named outside results_dir is where it is said.
    Neither results_dir nor a storage file may be in a storage's claims folder."""
    _check_not_in_claims(target)
    root = target.results_dir
    if not root or target.kind == "memory":
        return
    for what, path in storage_files(target):
        if not inside(path.parent, root):
            continue
        for file in (path, *(Path(f"{path}{suffix}") for suffix in OWN_SUFFIXES)):
            if os.path.lexists(file) and not inside(file, root):
                raise bad_value(target.key, _given(target),
                                f"{str(file)!r} (of its {what}) is a link that resolves "
                                f"outside results_dir={root!r}; allowed: a file in "
                                "results_dir (remove the link)")


_SQLITE_HEADER = b"SQLite format 3\x00"
_JOURNAL_SUFFIXES = (".journal", ".log")  # a path ending so, given alone, is read as a journal


def check_sqlite_file(target: StorageTarget) -> None:
    """Refuse, before anything opens or writes it, a SQLite URL's file that is no SQLite
    database: an Optuna journal (SQLite would call it damaged, and a SQLite file made in a
    new journal's place makes results_dir's default storage refused as no journal), another
    file, or a new file by a journal's name."""
    path = database_file(target.location) if target.kind == "rdb" else None
    if path is None:
        return
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return  # a folder, FIFO or device: `check_storage_places` and the open say it
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        head = b""
    except OSError:
        return  # unreadable: the open says why
    if head == _SQLITE_HEADER:
        return
    named = _plain_path(target)  # as the user wrote it
    as_journal = "study.storage=" if target.keys[0] == "study.storage" else "--storage "
    journal = f"{as_journal}{shlex.quote(named)}"
    default = path == Path(os.path.realpath(target.results_dir or ".")) / DEFAULT_JOURNAL
    unset = f", or {target.keys[0]} left unset (results_dir's journal)" if default else ""
    if head and begins_as_journal(path):
        raise bad_value(target.key, _given(target),
                        f"{named!r} is an Optuna journal, not a SQLite database; refused "
                        f"and left unchanged; allowed: the journal as {journal}{unset}")
    if head:
        raise bad_value(target.key, _given(target),
                        f"{named!r} is not a SQLite database (it does not begin with "
                        "SQLite's header: another file, or a database damaged at its start); "
                        "refused and left unchanged; allowed: a SQLite database file, or a "
                        "new name")
    if path.name.endswith(_JOURNAL_SUFFIXES):  # new or empty: what SQLite would make there
        raise bad_value(target.key, _given(target),
                        f"{named!r} has a journal's name (a {' or '.join(_JOURNAL_SUFFIXES)}"
                        " file is read as an Optuna journal); nothing was written; allowed: a "
                        f"SQLite file of another name (e.g. .db), or a journal as {journal}"
                        f"{unset}")


def _plain_path(target: StorageTarget) -> str:
    """The file of the target's SQLite URL as the user wrote it."""
    from sqlalchemy.engine import make_url

    return str(make_url(target.location).database)


def check_storage_places(target: StorageTarget) -> None:
    """Refuse, before anything is written, a storage file's place that cannot hold it: a
    folder, FIFO or device of its name, a link out of results_dir, or a SQLite file SQLite
    cannot open."""
    check_links(target)
    given = _given(target)
    for what, path in storage_files(target):
        if on_pseudo_filesystem(path):
            raise bad_value(target.key, given, f"its {what} {str(path)!r} would be in the "
                            f"kernel's files; allowed: a {what} file on a disk ({NOT_PSEUDO})")
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = None  # absent: made by the open (an unreachable folder is its to say)
        if mode is not None and not stat.S_ISREG(mode):
            raise bad_value(target.key, given,
                            f"its {what} {str(path)!r} exists and is not a regular file (a "
                            f"folder, FIFO or device); allowed: a {what} file or a new name")
        full = str(Path(os.path.realpath(path.parent)) / path.name)
        if what != "journal" and len(os.fsencode(full)) > SQLITE_MAX_PATH:
            raise bad_value(target.key, given,
                            f"its {what} {full!r} has a path of {len(os.fsencode(full))} bytes; "
                            f"allowed: at most {SQLITE_MAX_PATH} (SQLite's limit)")


def _empty_database(path: Path) -> bool:
    """Whether `path` holds no table and no write waits in its WAL: a file SQLite made and
    wrote nothing to (read as it is, immutable: reading makes no file)."""
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        return False
    if path.stat().st_size == 0:
        return True
    try:
        uri = f"file:{path}?immutable=1"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    except sqlite3.Error:
        return False  # not readable as a database: not ours to judge, kept


@contextlib.contextmanager
def removing_new_files(target: StorageTarget) -> Iterator[None]:
    """When the body fails, remove the storage files it made that hold nothing (an empty
    journal, a database with no table, their SQLite companions): a refused or failed open
    leaves the disk as it was. A file that existed before, or holds anything, is kept."""
    files = [path for _, path in storage_files(target)]
    new = [p for p in files if not os.path.lexists(p)]
    new_companions = [Path(f"{p}{s}") for p in new for s in SQLITE_COMPANIONS
                      if not os.path.lexists(f"{p}{s}")]
    try:
        yield
    except BaseException:
        for path in new:
            with contextlib.suppress(OSError):
                if not path.is_file() or not _empty_database(path):
                    continue
                for companion in (p for p in new_companions if str(p).startswith(str(path))):
                    companion.unlink(missing_ok=True)
                path.unlink()
        raise


@contextlib.contextmanager
def removing_new_database(path: Path | None) -> Iterator[None]:
    """When the body fails, remove the SQLite database `path` and its companions if the body
    made them: a schema cut short by the disk (a file-size limit) is no database to resume.
    Held under the database's lock (`ClaimLock.recovering`), so no other process opened it."""
    made = path is not None and not os.path.lexists(path)
    try:
        yield
    except BaseException:
        if made and path is not None:
            for file in (*(Path(f"{path}{s}") for s in SQLITE_COMPANIONS), path):
                with contextlib.suppress(OSError):
                    file.unlink(missing_ok=True)
        raise
