"""Shared bits of the commands: the one-line error convention, output to a closed pipe,
disk-full errors and the trust flag."""

from __future__ import annotations

import errno
import os
import sys

__all__ = ["EXIT_FAULT", "EXIT_USAGE", "TRUST_HELP", "disk_error", "fail", "print_out"]

EXIT_USAGE = 2
EXIT_FAULT = 1
TRUST_HELP = (
    "run the model._target_ named in the file (code chosen by the file's author); without it "
    "such files are refused"
)
# Errors of a full, over-quota or read-only filesystem: a fault of the machine, not a bug.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


def disk_error(exc: BaseException) -> str | None:
    """One line for an OSError of a full/read-only disk (also wrapped by SQLAlchemy), else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in _DISK_ERRNOS:
            where = f" writing {cur.filename!r}" if cur.filename else ""
            return (f"disk error{where}: {os.strerror(cur.errno)}; free space (or make it "
                    "writable) and run the same command again to resume")
        text = str(cur).lower()
        if "database or disk is full" in text or "disk i/o error" in text:
            return ("disk error writing the results database: database or disk is full; free "
                    "space and run the same command again to resume")
        cur = cur.__cause__ or cur.__context__ or getattr(cur, "orig", None)
    return None


def print_out(text: str) -> int:
    """Print to stdout; a reader that closed the pipe (`| head`) ends the command quietly."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


def fail(message: str) -> int:
    """Print `ipu-tune: error: <one line>` on stderr and return the usage exit code."""
    print("ipu-tune: error: " + " ".join(str(message).split()), file=sys.stderr)
    return EXIT_USAGE
