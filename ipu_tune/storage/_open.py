"""Resolve and open an Optuna storage, turning every failure into one line.

Default: an Optuna journal file `<results_dir>/ipu_tune.journal`, written by
`BatchedJournalStorage`: a trial's creation, then its parameters, attributes and result in one
fsync'd append (one fsync per finished trial), safe for several processes on one machine
through a kernel lock; many machines share a PostgreSQL URL. `memory` keeps a study in this
process only (a quick look; never resumed). Which to use when: docs/storage-choice.md.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import tempfile
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, InMemoryStorage

import ipu_tune.storage._places as _places
from ipu_tune._own_files import CLAIMS_SUFFIX, DEFAULT_JOURNAL, results_table_name
from ipu_tune._redact import redact
from ipu_tune.errors import IpuTuneError, disk_hint, unreachable
from ipu_tune.files import BAD_PLACE, NOT_PSEUDO, inside
from ipu_tune.storage._batched import BatchedJournalStorage, BatchingJournalBackend
from ipu_tune.storage._beating import (
    HEARTBEAT_GRACE_S,
    HEARTBEAT_INTERVAL_S,
    BeatingRDBStorage,
    stale_trials,
)
from ipu_tune.storage._claims import ClaimLock
from ipu_tune.storage._journal_lock import FlockLock
from ipu_tune.storage._rdb_read import CheckedRDBStorage
from ipu_tune.storage._reading import read_journal
from ipu_tune.storage._tag import MEMORY, export_tag, make_url
from ipu_tune.storage._torn import repair_torn_tail
from ipu_tune.storage._url import ALLOWED_STORAGES, check_url, damaged_database

__all__ = [
    "DEFAULT_JOURNAL",
    "HEARTBEAT_GRACE_S",
    "HEARTBEAT_INTERVAL_S",
    "MEMORY",
    "StorageTarget",
    "open_storage",
    "redact",
    "resolve_storage",
    "stale_trials",
]

_MEMORY_RESULTS = "sqlite:///:memory:"
_JOURNAL_PREFIX = "journal:///"
_SCHEMA_RACE_ATTEMPTS = 6
_SCHEMA_RACES = ("already exists", "duplicate key", "UNIQUE constraint")


@dataclass(frozen=True)
class StorageTarget:
    kind: str  # "journal" | "rdb" | "memory"
    location: str  # file path (journal), SQLAlchemy URL (rdb) or "memory"
    results_url: str  # SQLAlchemy URL of the results table
    # The results directory, the one folder ipu-tune creates for a journal; any other parent
    # folder must exist (a typo in journal:///... must not create folders anywhere).
    results_dir: str = ""
    # How the user named the storage and the results folder, for messages: the tuner's
    # study.storage / results_dir, a stored-study command's --storage / --results-dir.
    keys: tuple[str, str] = ("study.storage", "results_dir")
    given: bool = True  # the storage was named (else it is the results folder's journal)

    @property
    def key(self) -> str:
        """The option the user set that names this storage."""
        return self.keys[0] if self.given else self.keys[1]

    @property
    def claims(self) -> ClaimLock:
        """The claim lock of a storage on this machine's disk; a no-op for database servers."""
        if self.kind == "journal":
            return ClaimLock(self.location + CLAIMS_SUFFIX)
        if self.kind == "memory":  # one process
            return ClaimLock(None)
        url = make_url(self.location)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return ClaimLock(str(url.database) + CLAIMS_SUFFIX)
        if url.get_backend_name() == "postgresql":
            return ClaimLock(None, self.location)
        return ClaimLock(None)

    @property
    def export_tag(self) -> str:
        """Empty for the default storage (the journal in results_dir), else a short tag of the
        storage (without credentials): two studies of one name in two storages export to two
        folders, `<name>` and `<name>@<tag>`."""
        return export_tag(self.kind, self.location, self.results_dir)

    @property
    def display(self) -> str:
        return redact(self.location, self.location)


def resolve_storage(storage: str | None, results_dir: str,
                    keys: tuple[str, str] = ("study.storage", "results_dir")) -> StorageTarget:
    """Journal file for None, a `*.journal`/`*.log` path or `journal:///path`; `memory` for
    this process only (its results table too: nothing is kept); else a DB URL. `keys`: how
    the user named the storage and the results folder, for messages."""
    if storage == MEMORY:
        return StorageTarget("memory", MEMORY, _MEMORY_RESULTS, results_dir, keys)
    if storage is None or storage == "":
        path = str(Path(results_dir) / DEFAULT_JOURNAL)
    elif storage.startswith(_JOURNAL_PREFIX):
        path = storage[len(_JOURNAL_PREFIX) - 1 :]
    elif "://" not in storage and storage.endswith((".journal", ".log")):
        path = storage
    else:
        try:
            url = make_url(storage)
        except ValueError:
            raise IpuTuneError(f"{keys[0]}={redact(storage, storage)!r}: not a storage URL; "
                               f"allowed: {ALLOWED_STORAGES}") from None
        check_url(url, storage, keys[0])
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            # Lost when the process ends, one database per worker: no study anyone can resume.
            raise IpuTuneError(
                f"{keys[0]}={redact(storage, storage)!r}: an in-memory SQLite database (no "
                "file); allowed: sqlite:///FILE, or memory for a study of this process only")
        return StorageTarget("rdb", storage, _places.connect_url(storage), results_dir, keys)
    # In results_dir as the OS finds it (SQLite reads `..` by the letters: `database_file`):
    # the default journal's `results.db`, another journal's `results@<tag>.db` (a copy of its
    # studies, kept apart from the default's, never in a file beside a journal elsewhere).
    table = results_table_name(export_tag("journal", path, results_dir))
    results = "sqlite:///" + str(Path(os.path.realpath(results_dir or ".")) / table)
    return StorageTarget("journal", path, results, results_dir, keys,
                         given=storage is not None and storage != "")


def _check_journal_parent(path: Path, results_dir: str, key: str) -> None:
    parent = path.parent
    if parent.is_dir() or not results_dir:
        return
    if inside(parent, results_dir):
        return
    raise IpuTuneError(
        f"{key}={redact(str(path))!r}: folder {str(parent)!r} does not exist; create it "
        f"first, or keep the journal in results_dir={results_dir!r} (created on demand)"
    )


def _make_sqlite_parent(target: StorageTarget) -> None:
    """The folder of a SQLite file: created when inside results_dir, else it must exist (a
    typo in sqlite:///... must not create folders anywhere)."""
    url = make_url(target.location)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    parent = Path(str(url.database)).parent
    if parent.is_dir():
        return
    if not target.results_dir or not inside(parent, target.results_dir):
        raise IpuTuneError(
            f"{target.key}={target.display!r}: folder {str(parent)!r} does not exist; create "
            f"it first, or put the database in {target.keys[1]}={target.results_dir!r} (created on "
            "demand)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _folder_fault(target.keys[1], target.results_dir, exc) from None


def _engine_kwargs(url: str) -> dict[str, Any]:
    name = make_url(url).get_backend_name()
    if name == "sqlite":
        return {"connect_args": {"timeout": 60}}
    if name == "postgresql":
        return {"connect_args": {"connect_timeout": 5}, "pool_pre_ping": True}
    return {}


def _folder_fault(key: str, folder: str, exc: OSError) -> IpuTuneError:
    """A storage folder that cannot be made: a file in its place or a place holding no folder
    (/proc) is the input's fault (exit 2); a full or read-only disk, the machine's (exit 1)."""
    bad = exc.errno in BAD_PLACE
    hint = (f"allowed: a folder that can hold files (not a file, {NOT_PSEUDO})" if bad
            else disk_hint(exc.strerror or "") if exc.errno in (errno.ENOSPC, errno.EDQUOT)
            else "make it writable, or choose another folder")
    return IpuTuneError(f"{key}={folder!r}: cannot be written ({exc.strerror}); {hint}",
                        fault=not bad)


def _folder_of(target: StorageTarget) -> Path:
    """The folder of a storage file (a journal or SQLite); '.' for a server (writable)."""
    if target.kind == "journal":
        return Path(target.location).parent
    if target.kind == "rdb":
        url = make_url(target.location)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return Path(str(url.database)).parent
    return Path(".")


def _writable(folder: Path) -> bool:
    """Whether files can be made in `folder` (False on a read-only file system too)."""
    return os.access(folder, os.W_OK)


def _cannot_write(target: StorageTarget, folder: Path) -> IpuTuneError:
    """One line for a storage folder that cannot be written: the errno it would get (a
    read-only file system, permissions), a fault of the machine (exit 1), not bad input."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            why = "Permission denied"
    except OSError as exc:
        why = exc.strerror or "Permission denied"
    what = (f"{target.key}={str(folder)!r}" if target.kind == "journal" and not target.given
            else f"{target.key}={target.display!r}: folder {str(folder)!r}")
    return IpuTuneError(f"{what}: cannot be written ({why}); make it writable, or choose "
                        "another folder", fault=True)


def _make_folder(key: str, folder: Path) -> None:  # one line naming `key` when it cannot
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _folder_fault(key, str(folder), exc) from None


def open_storage(target: StorageTarget, read_only: bool = False) -> BaseStorage:
    """Open (creating when new) the storage; one-line `IpuTuneError` on any failure.

    `read_only`: the caller only reads (listing, explaining, exporting a study); a journal is
    read as it is, never repaired or locked (`read_journal`), and so is a SQLite file in a
    folder that cannot be written (a read-only mount, an archive), without its lock files."""
    if not read_only:  # before the journal or a lock file is made
        _places.check_storage_places(target)
    else:  # reading writes too: the results table, a lock beside the storage
        _places.check_links(target)
    _places.check_sqlite_file(target)  # a journal named by a SQLite URL, before its lock
    if read_only and target.kind == "journal":  # never repaired, locked or written
        return read_journal(Path(target.location), target.key)
    if read_only and not _writable(_folder_of(target)):
        # No lock file can be made, none is needed to read; SQLite opens a database in WAL
        # mode in a read-only folder only as immutable (it cannot make its -shm file).
        file = quote(str(_places.database_file(target.location)))
        return _open_rdb(target, f"sqlite:///file:{file}?immutable=1&uri=true")
    if target.kind == "memory":
        print("ipu-tune: study.storage=memory: the study lives in this process only and cannot "
              "be resumed (exports are still written); leave study.storage unset to keep it",
              file=sys.stderr)
        return InMemoryStorage()
    if target.kind == "journal":
        path = Path(target.location)
        _check_journal_parent(path, target.results_dir, target.key)
        _make_folder(target.key, path.parent)
        if not _writable(path.parent):
            raise _cannot_write(target, path.parent)
        try:
            journal = _open_journal(path)
        except IpuTuneError:
            raise
        except Exception as exc:
            raise _unreadable_journal(target, path, exc) from None
        # results_dir, for its results table, once the journal is one (a refusal makes none).
        _make_folder(target.keys[1], Path(target.results_dir))
        return journal
    _make_sqlite_parent(target)
    if not _writable(_folder_of(target)):  # before a lock file is made beside it
        raise _cannot_write(target, _folder_of(target))
    # Workers starting together on a new SQLite file would race to create Optuna's schema
    # ("UNIQUE constraint failed: alembic_version"): one at a time under the file's lock.
    _check_sqlite_folder(target)
    local = target.claims
    fresh_lock = local.local and local.path is not None and not os.path.exists(local.path)
    try:
        with (local.recovering() if local.local else nullcontext(),
              _places.removing_new_database(_places.database_file(target.location))):
            return _open_rdb(target)
    except BaseException:
        if fresh_lock and local.path is not None:  # a refused storage leaves nothing behind
            with contextlib.suppress(OSError):
                os.unlink(local.path)
        raise


def _check_sqlite_folder(target: StorageTarget) -> None:
    """SQLite creates its file but not the folders above it, and a device or folder is no
    database: one line, not a traceback or a disk error."""
    url = make_url(target.location)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    file = Path(str(url.database))
    if not file.parent.is_dir():
        raise IpuTuneError(f"{target.key}={target.display!r}: folder {str(file.parent)!r} does "
                           "not exist; create it first")
    if os.path.lexists(file) and not file.is_file():  # /dev/zero is no disk that is full
        raise IpuTuneError(f"{target.key}={target.display!r}: not a regular file (a folder, "
                           "FIFO or device); allowed: a SQLite database file or a new name")


def _unreadable_journal(target: StorageTarget, path: Path, exc: Exception) -> IpuTuneError:
    # The default journal is named by results_dir, whose value is the folder.
    named = (f"{target.key}={target.results_dir!r}: its journal {str(path)!r}"
             if target.key == "results_dir" else f"{target.key}={str(path)!r}")
    return IpuTuneError(
        f"{named}: cannot read the journal file "
        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
        "it is corrupted or not an Optuna journal")


def _journal(path: Path) -> BaseStorage:
    return BatchedJournalStorage(BatchingJournalBackend(str(path), FlockLock(str(path))))


def _open_journal(path: Path) -> BaseStorage:
    """Recognise the journal and repair its tail; when Optuna then cannot read a line in the
    middle, move every bad line aside and read it again (a sound journal is read once)."""
    repair_torn_tail(path)
    try:
        return _journal(path)
    except Exception:  # judged line by line below
        if repair_torn_tail(path, whole=True) is None:
            raise
    return _journal(path)


def _rdb_kwargs(url: str) -> dict[str, Any]:
    """Heartbeats on a database server: a worker that dies on another host (no PID to check)
    stops beating, and after the grace period the next worker fails its trial and retries it
    (`stale_trials`; the tuner fails and retries it as it does a dead worker's trial found by
    PID, not by Optuna's retry callback, which copies the dead trial's attributes)."""
    if make_url(url).get_backend_name() == "sqlite":
        return {}  # one machine: dead workers are found by PID (tuner's recovery)
    return {"heartbeat_interval": HEARTBEAT_INTERVAL_S, "grace_period": HEARTBEAT_GRACE_S}


def _open_rdb(target: StorageTarget, url: str | None = None) -> BaseStorage:
    """`url`: the one to connect to, when not the target's own (a read-only SQLite file)."""
    for attempt in range(_SCHEMA_RACE_ATTEMPTS):
        try:
            with warnings.catch_warnings():  # heartbeats are "experimental" since Optuna 2.9
                warnings.simplefilter("ignore", ExperimentalWarning)
                kwargs = _rdb_kwargs(target.location)
                cls = BeatingRDBStorage if kwargs else CheckedRDBStorage
                storage = cls(url or _places.connect_url(target.location),
                              engine_kwargs=_engine_kwargs(target.location), **kwargs)
            parsed = make_url(target.location)
            if parsed.get_backend_name() == "sqlite" and parsed.database:
                # Named as the user named it (`results/s.db`), as a journal's errors are.
                _places.name_errors(storage.engine, parsed.database)
            elif parsed.get_backend_name() != "sqlite":  # a server: its URL, password masked
                _places.name_errors(storage.engine, target.display)
            return storage
        except Exception as exc:
            parsed = make_url(target.location)
            broken = damaged_database(exc, parsed.database, f"{target.key}={target.display!r}") if (
                parsed.get_backend_name() == "sqlite") else None
            if broken is not None:  # a page the open itself read: no retry reads it
                raise IpuTuneError(broken) from None
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            first = detail[0] if detail else type(exc).__name__
            # Workers starting together on a new database race to create Optuna's schema; the
            # loser finds it complete on the next try.
            racing = any(s in first for s in _SCHEMA_RACES)
            if racing and attempt < _SCHEMA_RACE_ATTEMPTS - 1:
                time.sleep(0.2 * (attempt + 1))
                continue
            down = (make_url(target.location).get_backend_name() != "sqlite"
                    and unreachable("\n".join(detail)))
            raise IpuTuneError(
                f"{target.key}={target.display!r}: cannot open ({redact(first, target.location)})"
                + ("; run the same command again once the server is reachable" if down else ""),
                fault=down) from None
    raise AssertionError("unreachable")


def _not_fallback(record: logging.LogRecord) -> bool:
    """Drop Optuna's warning that a trials query failed and it falls back to a slower one: its
    query (SQL over several lines) fails when the server dies, which the command's one line
    reports; the other cause, too many trials for one IN list, is recovered from silently."""
    return "Falling back to a slower alternative" not in record.getMessage()


def _silence() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("optuna.storages._rdb.storage").addFilter(_not_fallback)


_silence()
