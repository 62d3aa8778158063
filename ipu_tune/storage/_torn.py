"""Cut a torn last record off a journal file before anything appends to it.

A full disk (or a kill) during Optuna's `append_logs` can leave the journal ending in part of a
line. Optuna skips such a last line when reading, but its next append lands right after it and
fuses the two into one invalid line in the middle of the file, which makes the whole study
unreadable. Under the journal's own lock (no writer is mid-append then), a tail without its
newline is either a complete JSON record (the newline alone was lost: restore it) or a torn one
(cut it, keeping the bytes beside the journal as `<journal>.torn-<UTC timestamp>`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import BinaryIO

from ipu_tune.storage._journal_lock import FlockLock

__all__ = ["repair_torn_tail"]

_CHUNK_BYTES = 1 << 16


def _tail_start(f: BinaryIO, size: int) -> int:
    """Offset just after the last newline of the open file (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK_BYTES)
        f.seek(start)
        chunk = f.read(end - start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def _is_record(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return False


def repair_torn_tail(path: Path) -> Path | None:
    """Repair the journal at `path` in place; returns the backup file when bytes were cut."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    lock = FlockLock(str(path))
    lock.acquire()
    try:
        with path.open("r+b") as f:
            size = os.fstat(f.fileno()).st_size
            start = _tail_start(f, size)
            if start == size:
                return None
            f.seek(start)
            tail = f.read(size - start)
            if _is_record(tail):
                f.seek(size)
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())
                return None
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            backup = path.with_name(f"{path.name}.torn-{stamp}-{os.getpid()}")
            backup.write_bytes(tail)
            f.truncate(start)
            f.flush()
            os.fsync(f.fileno())
    finally:
        lock.release()
    print(f"ipu-tune: journal {str(path)!r} ended in a torn record ({len(tail)} bytes, e.g. "
          f"after a full disk); cut it and kept the bytes in {str(backup)!r}", file=sys.stderr)
    return backup
