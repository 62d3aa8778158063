"""A journal-file lock the kernel releases when its holder dies.

Optuna's symlink/open-file locks leave a stale lock behind a SIGKILLed process and make the next
process wait out a grace period; `fcntl.flock` locks vanish with the process, so a killed study
resumes at once. Local file systems only (for NFS use Optuna's own locks or PostgreSQL).
"""

from __future__ import annotations

import fcntl
import os

from optuna.storages.journal._file import BaseJournalFileLock

__all__ = ["FlockLock"]


class FlockLock(BaseJournalFileLock):
    def __init__(self, filepath: str) -> None:
        self._path = filepath + ".lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
