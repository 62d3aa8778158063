"""The one exception type users see.

User errors (bad config, unknown model, a file that is no storage) raise `IpuTuneError` with a
one-line message naming the key, the value and what is allowed; faults of a run (a worker
killed, a full or read-only disk, a database server that does not answer) raise it with
`fault=True`. Internal invariants use
`assert`; they are bugs, not user errors.
"""

from __future__ import annotations

import difflib
import errno
import math
import os
import re
from collections.abc import Iterable

from ipu_tune._redact import redact

__all__ = [
    "DATABASE_FILE",
    "MAX_SHOWN",
    "UNREACHABLE",
    "IpuTuneError",
    "bad_value",
    "bound_text",
    "described",
    "did_you_mean",
    "disk_fault",
    "disk_hint",
    "key_name",
    "mentions_disk_fault",
    "one_line",
    "safe_repr",
    "server_fault",
    "shorten",
    "shown",
    "unreachable",
]

# A value echoed in a message is cut in its middle past this many characters, so that the
# message stays one readable line whatever was given (a path of 5,000 characters, a list of
# 50,000 layers); its start and end stay, the two parts a typo is usually found in.
MAX_SHOWN = 200
_LONG_WORD = re.compile(rf"\S{{{MAX_SHOWN + 1},}}")

# Errors of a full, over-quota or read-only filesystem, or a file-size limit: a fault of the
# machine, not a bug and not bad input.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}
# The same as drivers word it inside a message (SQLite, SQLAlchemy, the OS).
_DISK_TEXTS = ("database or disk is full", "disk i/o error", "no space left on device",
               "disk quota exceeded", "file too large", "read-only file system",
               "readonly database")
# The attribute a storage sets on a driver's error to name the database file it was using
# (`ipu_tune.storage.name_errors`): SQLite words a full disk or a file-size limit without a
# path ("disk I/O error"), and the line must name the file as a journal's OSError does.
DATABASE_FILE = "ipu_tune_database_file"
_AGAIN_RESUME = "and run the same command again to resume"
# A database server that does not answer (down, no route, no name service), as drivers word it.
UNREACHABLE = ("connection refused", "timeout expired", "timed out", "could not translate host",
               "failed to resolve host", "no route to host", "network is unreachable",
               "server closed the connection", "could not connect", "connection reset",
               "terminating connection", "connection already closed",
               # libpq's hint after a connection that got no answer, by TCP or by a Unix
               # socket (whose missing socket file says "No such file or directory"); never
               # after the server answered (a wrong password, an unknown database).
               "is the server running")


def unreachable(text: str) -> bool:
    """Whether a driver's message (all of its lines: libpq puts its hint on the second) says
    the database server did not answer, rather than refused what it was asked. SQLAlchemy's
    `[SQL: ...]` after them is not read: its parameters are a trial's text."""
    lowered = text.split("\n[SQL:", 1)[0].lower()
    return any(s in lowered for s in UNREACHABLE)


class IpuTuneError(ValueError):
    """A user-facing error whose message is a single line. `fault`: not the input's fault but
    the run's (a worker killed): the command line exits 1, not the bad-input code 2."""

    def __init__(self, message: str, fault: bool = False) -> None:
        super().__init__(" ".join(str(message).split()))
        self.fault = fault


def _cut(text: str) -> str:
    """`text` cut in its middle past `MAX_SHOWN` characters. Passwords are masked first: a cut
    through a URL would leave a part of its password that no later redaction recognises."""
    if len(text) <= MAX_SHOWN:
        return text
    text = redact(text)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:150]}...({len(text) - 190} characters)...{text[-40:]}"


def safe_repr(value: object) -> str:
    """`repr(value)`, also of an integer Python will not print in decimal (over 4300 digits,
    from Python code or a file's `0x...`): such an integer is shown in hex, which has no
    limit, inside lists, tuples and dicts too."""
    try:
        return repr(value)
    except ValueError:
        if isinstance(value, int):
            return hex(value)
        if isinstance(value, list | tuple):
            inner = ", ".join(safe_repr(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{safe_repr(k)}: {safe_repr(v)}"
                                   for k, v in value.items()) + "}"
        return f"<{type(value).__name__}>"


def shown(value: object) -> str:
    """`repr(value)` (`safe_repr`), cut in its middle past `MAX_SHOWN` characters."""
    return _cut(safe_repr(value))


# A key as a schema's, a space file's or a config class's keys are written: a name.
_NAME = re.compile(r"[^\W\d][\w.\-]{0,63}")


def _token_like(key: str) -> bool:
    """Whether a part of `key` (between `_`, `.` and `-`) has a token's shape, not a word's:
    16 or more characters mixing letters and digits (`AKIAIOSFODNN7EXAMPLE`, GitHub's
    `ghp_...`, `sk-proj-abc123def456ghi789`), or 24 or more of any kind. A key a user types has
    neither (`max_2d_position_embeddings`, a misspelt `partials16` or `use_bfloat16x`)."""
    return any((len(part) >= 16 and any(c.isdigit() for c in part)
                and any(c.isalpha() for c in part)) or len(part) >= 24
               for part in re.split(r"[_.\-]", key))


def key_name(key: object) -> str:
    """A key read from a file, as a message names it: the key itself when it is a name (a
    letter, then letters, digits, `_`, `-` or `.`; at most 64 characters; not of a token's
    shape, `_token_like`), else only its length.
    A file given by mistake (`/etc/shadow`, a `.env`) reads as a mapping whose keys are its
    lines, password hashes and tokens included: such a key is never echoed."""
    if isinstance(key, str) and _NAME.fullmatch(key) and not _token_like(key):
        return key
    n = len(str(key))
    return f"<a key of {n} character{'s' * (n != 1)} that is no name, not shown>"


def described(value: object) -> str:
    """A refused value read from a file, as a message shows it: a scalar as `shown` (a bound
    the user typed), a mapping or a list only by its type and size. A file given by mistake
    reads as a structure whose items are its lines, and those are never echoed."""
    if isinstance(value, dict | list | tuple | set | frozenset):
        n = len(value)
        what = "mapping of" if isinstance(value, dict) else "list of"
        unit = "key" if isinstance(value, dict) else "item"
        return f"a {what} {n} {unit}{'s' * (n != 1)}"
    return shown(value)


def shorten(text: str) -> str:
    """`text` with every run of more than `MAX_SHOWN` non-blank characters cut in its middle
    (the printed line of any message: a long path or override is one such run)."""
    return _LONG_WORD.sub(lambda m: _cut(m.group(0)), text)


def mentions_disk_fault(text: str) -> bool:
    """Whether a message words a full or read-only disk as the drivers and the OS do (a fault
    wrapped in another error's text)."""
    low = text.lower()
    return any(t in low for t in _DISK_TEXTS)


def disk_hint(fault: str, again: str = "") -> str:
    """What to do about the disk fault `fault` (a `disk_fault` line, or the text holding one).
    `again`: what running the command again does, when it does not resume a study (a file
    written whole is written again: there is nothing to resume)."""
    then = again or _AGAIN_RESUME
    low = fault.lower()
    if "file too large" in low:
        return f"raise the file-size limit (ulimit -f) {then}"
    if "read-only" in low or "readonly" in low:
        return f"make it writable {then}"
    if _file_size_limited() and not any(t in low for t in _NOT_A_SIZE_LIMIT):
        # SQLite words a write the file-size limit refused (EFBIG) as "disk I/O error" or
        # "database or disk is full", no errno: under a limit, that is the likelier cause.
        return (f"raise the file-size limit (ulimit -f, now {_file_size_limited()} KiB), or "
                f"free space (or make it writable), {then}")
    return f"free space (or make it writable) {then}"


# Faults whose errno rules out the file-size limit (it is EFBIG, "file too large").
_NOT_A_SIZE_LIMIT = ("no space left on device", "disk quota exceeded")


def _file_size_limited() -> int:
    """This process's file-size limit (`ulimit -f`) in KiB; 0 when there is none."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return 0 if soft == resource.RLIM_INFINITY else max(1, soft // 1024)


# YAML 1.1 (PyYAML, OmegaConf) reads an unquoted yes/no/on/off/true/false as a boolean, and a
# text field then holds 'True' or 'False': `partials: off` arrives as 'False'. The user wrote a
# word, so the message says what became of it.
_YAML_BOOLEAN = (" (an unquoted yes/no/on/off/true/false is read as a boolean: quote a word "
                 "meant as text)")


def bad_value(key: str, value: object, allowed: str,
              choices: Iterable[object] = ()) -> IpuTuneError:
    """Build the canonical message: ``key=value: allowed`` (a long value cut, `shown`), then
    the one of `choices` the value was likely meant as (`did_you_mean`)."""
    hint = _YAML_BOOLEAN if value in ("True", "False") and "true" not in allowed else ""
    return IpuTuneError(f"{key}={shown(value)}: {allowed}{hint}{did_you_mean(value, choices)}")


def bound_text(value: float) -> str:
    """A limit as a message prints it, exactly: `:g` keeps 6 digits, so 2^20 read 1.04858e+06,
    a bound the value given may well be under. An integer in full (thousands separated from
    10,000: 1,048,576), also one a float holds beyond `:g`'s digits; any other float as `:g`
    prints it when that reads back the same (1e+13, 0.001), else in full."""
    if isinstance(value, float):
        short = f"{value:g}"
        if not math.isfinite(value) or float(short) == value:
            return short
        if not value.is_integer():
            return repr(value)
        value = int(value)
    return f"{value:,}" if abs(value) >= 10_000 else str(value)


# How close a typo must be to a name to be offered (difflib's ratio): `resnet5` and
# `throughtput` are; `mk3` is not offered `mk1` (a guess among near-equal names).
_NEAR = 0.75


def _squashed(text: str) -> str:
    """A name as typed loosely: any case, `_`, `-` or `.` between its parts or not
    (`DeBERTa-V2`, `deberta_v2` and `debertav2` are `deberta-v2`)."""
    return re.sub(r"[-_.\s]", "", text.lower())


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """`; did you mean 'NAME'?` for a name `value` was likely meant as, among `choices` (the
    key's allowed names): the same but for case or separators, else the nearest misspelling
    (difflib); '' when none is near, or `value` is no text or already allowed."""
    names = [str(c) for c in choices]
    if not isinstance(value, str) or not value or value in names:
        return ""
    squashed = _squashed(value)
    found = next((n for n in names if n.lower() == value.lower()), None) or next(
        (n for n in names if _squashed(n) == squashed), None)
    if found is None:
        by_key: dict[str, str] = {}
        for n in names:
            by_key.setdefault(_squashed(n), n)
        near = difflib.get_close_matches(squashed, list(by_key), n=1, cutoff=_NEAR)
        found = by_key[near[0]] if near else None
    return f"; did you mean {found!r}?" if found is not None else ""


def disk_fault(exc: BaseException, what: str = "") -> str | None:
    """`disk error writing PATH: WHY` for a full or read-only disk anywhere in `exc`'s chain,
    else None. A driver (SQLite, SQLAlchemy) words it in a message without a path: `what` is
    written then, else the file a storage tagged the error with (`DATABASE_FILE`), else
    "the database"."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not c for c in chain):
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    tagged = next((getattr(c, DATABASE_FILE) for c in chain if getattr(c, DATABASE_FILE, None)),
                  None)
    for cur in chain:
        if isinstance(cur, OSError) and cur.errno in _DISK_ERRNOS:
            where = f" writing {str(cur.filename)!r}" if cur.filename else ""
            return f"disk error{where}: {os.strerror(cur.errno)}"
        text = " ".join(str(cur).split())
        found = next((t for t in _DISK_TEXTS if t in text.lower()), None)
        if found is not None:
            named = what or (repr(str(tagged)) if tagged else "the database")
            return f"disk error writing {named}: {found}"
    return None


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line: an `IpuTuneError`'s message, a full or read-only disk
    (`disk_fault`), else the error's type and first line."""
    if isinstance(exc, IpuTuneError):
        return str(exc)
    found = disk_fault(exc) or server_fault(exc)
    if found is not None:
        return found
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def server_fault(exc: BaseException) -> str | None:
    """`the database server stopped answering (WHY)` for a lost or refused connection anywhere
    in `exc`'s chain (SQLAlchemy wraps the driver's error), else None. Credentials in the
    driver's words are the caller's to redact (`ipu_tune.storage.redact`)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        lines = str(cur).strip().splitlines()
        first = lines[0] if lines else ""
        if type(cur).__name__ == "OperationalError" and unreachable(str(cur)):
            why = re.sub(r"^\([\w.]+\)\s*", "", first)  # SQLAlchemy's "(driver.Error) "
            return f"the database server stopped answering ({why})"
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    return None
