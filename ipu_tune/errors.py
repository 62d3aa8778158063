"""The one exception type users see.

User errors (bad config, unknown model, unreachable storage) raise `IpuTuneError` with a
one-line message naming the key, the value and what is allowed; faults of a run (a worker
killed) raise it with `fault=True`. Internal invariants use
`assert`; they are bugs, not user errors.
"""

from __future__ import annotations

import errno
import os

__all__ = ["DISK_HINT", "IpuTuneError", "bad_value", "disk_fault", "one_line"]

# Errors of a full, over-quota or read-only filesystem, or a file-size limit: a fault of the
# machine, not a bug and not bad input.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}
# The same as drivers word it inside a message (SQLite, SQLAlchemy, the OS).
_DISK_TEXTS = ("database or disk is full", "disk i/o error", "no space left on device",
               "disk quota exceeded", "file too large", "read-only file system",
               "readonly database")
DISK_HINT = "free space (or make it writable) and run the same command again to resume"


class IpuTuneError(ValueError):
    """A user-facing error whose message is a single line. `fault`: not the input's fault but
    the run's (a worker killed): the command line exits 1, not the bad-input code 2."""

    def __init__(self, message: str, fault: bool = False) -> None:
        super().__init__(" ".join(str(message).split()))
        self.fault = fault


def bad_value(key: str, value: object, allowed: str) -> IpuTuneError:
    """Build the canonical message: ``key=value: allowed``."""
    return IpuTuneError(f"{key}={value!r}: {allowed}")


def disk_fault(exc: BaseException, what: str = "the results database") -> str | None:
    """`disk error writing PATH: WHY` for a full or read-only disk anywhere in `exc`'s chain,
    else None. A driver (SQLite, SQLAlchemy) words it in a message without a path: `what` is
    written then."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in _DISK_ERRNOS:
            where = f" writing {str(cur.filename)!r}" if cur.filename else ""
            return f"disk error{where}: {os.strerror(cur.errno)}"
        text = " ".join(str(cur).split())
        found = next((t for t in _DISK_TEXTS if t in text.lower()), None)
        if found is not None:
            return f"disk error writing {what}: {found}"
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    return None


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line: an `IpuTuneError`'s message, a full or read-only disk
    (`disk_fault`), else the error's type and first line."""
    if isinstance(exc, IpuTuneError):
        return str(exc)
    found = disk_fault(exc)
    if found is not None:
        return found
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
