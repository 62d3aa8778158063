"""Claiming a trial versus recovering dead workers' trials, on one machine.

A worker creates its trial (`ask`) and then tags it with its identity: two writes, and a kill
between them leaves an untagged RUNNING trial. Workers hold a shared `flock` over those two
writes; recovery holds it exclusively, so every untagged RUNNING trial it sees belongs to a
process that died mid-claim. The kernel drops the lock of a killed process.

Local storages only (a journal or SQLite file); with a database server shared by several
machines, recovery cannot see other machines' locks and falls back to the trial's age.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = ["ClaimLock"]


class ClaimLock:
    def __init__(self, path: str | None) -> None:
        self.path = path

    @property
    def local(self) -> bool:
        """True when every worker of the storage runs on this machine and uses this lock."""
        return self.path is not None

    @contextmanager
    def _flock(self, mode: int) -> Iterator[None]:
        if self.path is None:
            yield
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def claiming(self) -> AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_SH)

    def recovering(self) -> AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_EX)
