"""The files ipu-tune's storages keep, by name and by content.

A journal, a SQLite database and the lock and claim files beside them hold every study: no
writer may replace one (`--output` naming one would lose them all), and no study may export
into a folder named like one (it would be made where the storage's file belongs, or its
exports would land among the workers' claims). A storage file is recognised by what it holds
(a SQLite database named `s.csv` is still one) and, for the files whose content says nothing
(an empty lock, SQLite's `-shm`), by ipu-tune's own names or by the storage they sit beside.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = [
    "CLAIMS_RUNNING",
    "CLAIMS_SUFFIX",
    "DEFAULT_JOURNAL",
    "EXPORT_TAG_CHARS",
    "JOURNAL_LOCK_SUFFIX",
    "LEGACY_JOURNAL_LOCK_SUFFIX",
    "OWN_SUFFIXES",
    "RESULTS_DB",
    "SQLITE_COMPANIONS",
    "is_results_table",
    "reserved_study_name",
    "results_table_name",
    "storage_file",
]

DEFAULT_JOURNAL = "ipu_tune.journal"
RESULTS_DB = "results.db"
# ipu-tune's flock beside a journal. Not `.lock`: that is the name Optuna's own
# `JournalFileOpenLock` (optuna-dashboard, a plain `JournalStorage`) creates and, after its
# 30 s grace period, deletes as stale - deleting ipu-tune's lock under a live worker.
JOURNAL_LOCK_SUFFIX = ".ipu_tune-lock"
# What earlier versions named their journal lock: an old study keeps the file, which this
# version neither writes nor removes (it may be Optuna's own lock of the moment).
LEGACY_JOURNAL_LOCK_SUFFIX = ".lock"
CLAIMS_SUFFIX = ".claims"  # the claim lock; `.claims.refine` and `.claims.running/` beside it
CLAIMS_RUNNING = f"{CLAIMS_SUFFIX}.running"  # the folder of the live workers' claim files
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")  # SQLite's files beside a database
# The files ipu-tune makes beside a storage file, by the suffix added to its name.
OWN_SUFFIXES = (JOURNAL_LOCK_SUFFIX, LEGACY_JOURNAL_LOCK_SUFFIX, CLAIMS_SUFFIX,
                f"{CLAIMS_SUFFIX}.refine", CLAIMS_RUNNING, *SQLITE_COMPANIONS)
# A study in a storage other than the default exports to `<name>@<tag>`: the tag is this many
# hex digits of the storage URL's hash, or `memory`.
EXPORT_TAG_CHARS = 6
_TAGGED = re.compile(rf".*@([0-9a-f]{{{EXPORT_TAG_CHARS}}}|memory)")
# The results table of a journal, in results_dir: `results.db` for the default journal,
# `results@<tag>.db` for another (its export tag), so two journals' studies of one name never
# share rows, and no table is made beside a journal outside results_dir.
_RESULTS_TABLE = re.compile(rf"results(@[0-9a-f]{{{EXPORT_TAG_CHARS}}})?\.db")


def is_results_table(name: str) -> bool:
    """Whether a file of this name is a journal's results table (ipu-tune's own file)."""
    return _RESULTS_TABLE.fullmatch(name) is not None


def results_table_name(tag: str) -> str:
    """The file name of the results table of a journal whose export tag is `tag`."""
    return f"results@{tag}.db" if tag else RESULTS_DB

_SQLITE_MAGIC = b"SQLite format 3\x00"
_WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
_ROLLBACK_MAGIC = b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7"
_JOURNAL_FIRST_LINE_BYTES = 65536


def _by_content(path: Path) -> str | None:
    """What the regular file `path` holds when it is a storage's: a SQLite database, WAL or
    rollback journal (by their magic numbers), an Optuna journal (a first line of JSON with an
    `op_code` and a `worker_id`)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_JOURNAL_FIRST_LINE_BYTES)
    except OSError:
        return None
    if head.startswith(_SQLITE_MAGIC):
        return "a SQLite database"
    if head[:4] in _WAL_MAGIC:
        return "a SQLite write-ahead log"
    if head.startswith(_ROLLBACK_MAGIC):
        return "a SQLite rollback journal"
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"{"):
        try:
            record = json.loads(first)
        except ValueError:
            return None
        if isinstance(record, dict) and {"op_code", "worker_id"} <= record.keys():
            return "an Optuna journal"
    return None


def _beside_storage(path: Path) -> str | None:
    """`path`'s role when it is one of the files ipu-tune or SQLite keep beside a storage file
    (`<storage><suffix>`, or a worker's file in `<storage>.claims.running/`)."""
    name = path.name
    if path.parent.name.endswith(CLAIMS_RUNNING):
        return "a worker's claim file"
    for suffix in OWN_SUFFIXES:
        if not name.endswith(suffix) or name == suffix:
            continue
        base = name[: -len(suffix)]
        if (base == DEFAULT_JOURNAL or _RESULTS_TABLE.fullmatch(base)
                or _by_content(path.with_name(base))):
            return f"the {suffix!r} file of the storage {base!r}"
    return None


def storage_file(path: str | Path) -> str | None:
    """What the existing regular file `path` is when it belongs to a storage (its journal or
    database, their lock, claim and SQLite files), else None."""
    path = Path(path)
    if path.name == DEFAULT_JOURNAL:
        return "ipu-tune's journal"
    if _RESULTS_TABLE.fullmatch(path.name):
        return "ipu-tune's results table"
    return _beside_storage(path) or _by_content(path)


def reserved_study_name(name: str) -> str | None:
    """Why `name` cannot name a study's export folder, else None: a name ending in `@<tag>`
    is another storage's study's folder (`<name>@<tag>`), and ipu-tune's own files and those
    beside any storage (a lock, the claims, SQLite's `-wal`) sit in results_dir, some only
    while a worker runs."""
    if _TAGGED.fullmatch(name):
        return (f"a name ending in @ and {EXPORT_TAG_CHARS} hex digits or @memory is the "
                "export folder of a study in another storage")
    if (name.startswith((DEFAULT_JOURNAL, RESULTS_DB)) or name == "multirun"
            or _RESULTS_TABLE.match(name)):
        return (f"names starting with {DEFAULT_JOURNAL}, {RESULTS_DB} or results@<tag>.db, "
                "and multirun, are ipu-tune's own files in results_dir")
    # A storage file has a suffix of its own (`studies.db`, `runs.journal`): a name like
    # `my-journal` is nothing's companion.
    base = next((name[: -len(s)] for s in OWN_SUFFIXES if name.endswith(s)), None)
    if base is not None and "." in base:
        return ("names of a file and one of " + ", ".join(OWN_SUFFIXES) + " are the files "
                "kept beside a storage")
    return None
