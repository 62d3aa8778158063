"""Claiming a trial versus recovering dead workers' trials; one study-wide lock.

A worker creates its trial (`ask`) and then records that it runs it: on one machine (a journal
or SQLite file) in its own locked file beside the storage (`RunningFile`, no storage write), on
a database server as a tag on the trial. A kill between the two leaves a RUNNING trial nobody
holds. On one machine workers hold an exclusive `flock` over the two steps, and recovery holds
it too, so every RUNNING trial recovery finds unheld belongs to a process that died. The kernel
drops the locks of a killed process. The lock is exclusive (not shared) because SQLite's
`SELECT ... FOR UPDATE` is a no-op: two workers taking the same enqueued (WAITING) trial in
parallel would both run it.

With a database server (PostgreSQL), claims need no lock (Optuna takes the WAITING trial with
`FOR UPDATE`), recovery cannot see other machines' claims and falls back to heartbeats and the
trial's age, and the study-wide lock (`recovering`: create the study, enqueue the warm start
once, recover) is a PostgreSQL advisory lock, which the server drops when its session dies.
"""

from __future__ import annotations

import fcntl
import os
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from ipu_tune.storage._running import RunningFile, held_trials

__all__ = ["ClaimLock"]


class ClaimLock:
    def __init__(self, path: str | None, server_url: str | None = None) -> None:
        self.path = path
        self.server_url = server_url  # a PostgreSQL URL: advisory lock for `recovering`

    @property
    def local(self) -> bool:
        """True when every worker of the storage runs on this machine and uses this lock."""
        return self.path is not None

    @contextmanager
    def _flock(self, mode: int) -> Iterator[None]:
        assert self.path is not None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextmanager
    def _advisory(self) -> Iterator[None]:
        import sqlalchemy
        from sqlalchemy.pool import NullPool

        assert self.server_url is not None
        key = zlib.crc32(b"ipu_tune-study-lock")
        engine = sqlalchemy.create_engine(self.server_url, poolclass=NullPool,
                                          connect_args={"connect_timeout": 5})
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
                try:
                    yield
                finally:
                    conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    conn.commit()
        finally:
            engine.dispose()

    def running_file(self, worker: str) -> RunningFile:
        """This worker's record of the trial it runs (a local storage; make it under
        `claiming`). Close it when the worker stops; a dead worker's is removed by `held`."""
        assert self.path is not None
        return RunningFile(self.path + ".running", worker)

    def held(self) -> tuple[dict[int, str], dict[int, str]]:
        """(trial number -> worker) held by this machine's live workers, and by dead ones (a
        local storage; call under `recovering`)."""
        assert self.path is not None
        return held_trials(self.path + ".running")

    def claiming(self) -> AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_EX) if self.path is not None else nullcontext()

    def recovering(self) -> AbstractContextManager[None]:
        """The study-wide lock: opening a study, its warm start and recovery, one at a time."""
        if self.path is not None:
            return self._flock(fcntl.LOCK_EX)
        if self.server_url is not None:
            return self._advisory()
        return nullcontext()
