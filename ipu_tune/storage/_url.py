"""A database URL checked before any driver sees it: what the URL says wrong is bad input.

A driver handed a malformed URL answers with a fault of its own: a password holding a bare `@`
splits into a host `P@127.0.0.1` that "fails to resolve" (read as a server down, exit 1), and
its message quotes the password's pieces. `postgres://` is no SQLAlchemy scheme ("Can't load
plugin"). Both are refused in one line saying what is allowed, before connecting.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ipu_tune._redact import redact
from ipu_tune.errors import DATABASE_FILE, IpuTuneError

__all__ = ["ALLOWED_STORAGES", "check_url", "damaged", "damaged_database", "damaged_hint"]

ALLOWED_STORAGES = ("a journal file (*.journal), sqlite:///FILE, postgresql://USER@HOST/DB, "
                    "memory")
# SQLAlchemy's own split of a URL's login: the user (no `:` or `/`), then the password up to
# the FIRST `@` (`sqlalchemy.engine.url._parse_url`); whatever follows is host, port,
# database and options, none of which holds a `@` of a well-formed URL.
_LOGIN = re.compile(r"([^:/]*)(?::([^@]*))?@")
# SQLite's words for a file that is no longer a whole database (cut short, overwritten).
_DAMAGED = ("database disk image is malformed", "file is not a database")
# Their result codes (SQLITE_CORRUPT, SQLITE_NOTADB), whatever an extended code or a newer
# SQLite words them: cut short, overwritten in its header or on any later page.
_DAMAGED_CODES = (11, 26)


def check_url(url: Any, text: str, key: str) -> None:
    """Refuse, naming `key`, a URL of no known scheme or with a `@` past its login."""
    from sqlalchemy.exc import NoSuchModuleError

    shown = redact(text, text)
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        scheme = url.drivername
        wrong = " (postgres:// is no SQLAlchemy scheme: write postgresql://)" if (
            scheme.split("+")[0] == "postgres") else ""
        raise IpuTuneError(f"{key}={shown!r}: unknown database scheme {scheme!r}{wrong}; "
                           f"allowed: {ALLOWED_STORAGES}") from None
    if getattr(dialect, "is_async", False):  # Optuna's storage runs synchronous sessions
        raise IpuTuneError(f"{key}={shown!r}: {url.drivername} is an asyncio driver, which "
                           f"Optuna's storage cannot use; allowed: {ALLOWED_STORAGES}")
    try:  # a scheme SQLAlchemy knows whose driver is not installed (mysql:// without PyMySQL)
        dialect.import_dbapi()
    except ImportError as exc:
        raise IpuTuneError(f"{key}={shown!r}: its driver ({url.drivername}: {exc.name or exc}) "
                           f"is not installed; allowed: {ALLOWED_STORAGES} (or that driver "
                           "installed)") from None
    if url.get_backend_name() == "sqlite":  # a file name may hold `@` (results@<tag>.db)
        return
    body = text.split("://", 1)[-1]
    login = _LOGIN.match(body)
    if "@" in body[login.end() if login else 0:]:
        raise IpuTuneError(
            f"{key}={shown!r}: a '@' past the one that ends the login, so the password is cut "
            "there and the rest read as the host; allowed: the password percent-encoded, '@' "
            "as %40 (p@ss as p%40ss; '/' as %2F, ':' as %3A), or no password in the "
            "URL (PGPASSWORD, ~/.pgpass)")


def damaged(exc: BaseException) -> str | None:
    """SQLite's first line when `exc` or an error it wraps (SQLAlchemy's `orig`, a cause) says
    the database file is damaged, on opening it or on any query after (SQLite reads a page
    when a query needs it, so a damaged page is found by the query that needs it); else
    None."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen):
        seen.append(cur)
        code = getattr(cur, "sqlite_errorcode", None)
        lines = str(cur).strip().splitlines()
        first = lines[0] if lines else ""
        if (isinstance(code, int) and code & 0xFF in _DAMAGED_CODES) or any(
                s in first.lower() for s in _DAMAGED):
            return first
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    return None


def damaged_hint(first: str) -> str:
    """What to do about a SQLite database whose file is damaged ('' when `first`, the
    driver's line, says nothing of it): the same command cannot fix it, only the file can."""
    if not any(s in first.lower() for s in _DAMAGED):
        return ""
    return ("; the database file is damaged (cut short or overwritten), so its studies cannot "
            "be read; allowed: the file restored from a backup (`sqlite3 FILE .recover` may "
            "save what is left), or another storage")


def damaged_database(exc: BaseException, file: str | None = None,
                     named: str | None = None) -> str | None:
    """One line for a study's SQLite database that SQLite found damaged on a page a query read
    after the open (Optuna wraps it in a `StorageInternalError`), else None. The file is the
    one the storage tagged the error with (`DATABASE_FILE`), else `file` (a page the open read,
    before any tag): SQLite's words name none; `named`, what the line begins with instead of
    the file (the option that gave it). No
    retry can read the page, so the line says how to get a whole file back."""
    found = damaged(exc)
    if found is None:
        return None
    why = re.sub(r"^\([\w.]+\)\s*", "", found)  # SQLAlchemy's "(sqlite3.DatabaseError) "
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not c for c in chain):
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    file = next((str(f) for c in chain if (f := getattr(c, DATABASE_FILE, None))), file)
    named = named or (f"SQLite database {file!r}" if file else "the study's SQLite database")
    recover = (f'sqlite3 {shlex.quote(file)} ".recover" | sqlite3 NEW.db' if file
               else 'sqlite3 FILE ".recover" | sqlite3 NEW.db')
    return (f"{named}: damaged ({why}), so its studies cannot be read; allowed: the file "
            f"restored from a backup, or what is left of it saved to a new file ({recover}) "
            "and NEW.db given as the storage (sqlite:///NEW.db)")
