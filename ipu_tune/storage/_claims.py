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

import time
import zlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from ipu_tune._own_files import CLAIMS_RUNNING, CLAIMS_SUFFIX
from ipu_tune.errors import IpuTuneError
from ipu_tune.storage._journal_lock import LOCK_TIMEOUT_S, lock_fd, unlock_fd
from ipu_tune.storage._running import Held, RunningFile, held_trials

__all__ = ["ClaimLock"]

_RUNNING = CLAIMS_RUNNING[len(CLAIMS_SUFFIX):]  # the folder beside the claim lock


class ClaimLock:
    def __init__(self, path: str | None, server_url: str | None = None,
                 timeout_s: float = LOCK_TIMEOUT_S) -> None:
        self.path = path
        self.server_url = server_url  # a PostgreSQL URL: advisory lock for `recovering`
        self.timeout_s = timeout_s  # the longest wait for a lock before one line names its holder

    @property
    def local(self) -> bool:
        """True when every worker of the storage runs on this machine and uses this lock."""
        return self.path is not None

    @contextmanager
    def _flock(self, suffix: str = "", what: str = "claim lock") -> Iterator[None]:
        assert self.path is not None
        fd = lock_fd(self.path + suffix, what, self.timeout_s)  # names a holder that stays
        try:
            yield
        finally:
            unlock_fd(fd)

    @contextmanager
    def _advisory(self, study: str | None) -> Iterator[None]:
        """PostgreSQL's session advisory lock on (ipu_tune, study): studies of one database
        do not wait for each other, and a holder that never lets go (a stopped client) ends
        the wait after `LOCK_TIMEOUT_S` with one line naming its server PID."""
        import sqlalchemy
        from sqlalchemy.pool import NullPool

        assert self.server_url is not None
        keys = {"a": _int4(zlib.crc32(b"ipu_tune-study-lock")),
                "b": _int4(zlib.crc32((study or "").encode()))}
        engine = sqlalchemy.create_engine(self.server_url, poolclass=NullPool,
                                          connect_args={"connect_timeout": 5})
        try:
            with engine.connect() as conn:
                _advisory_wait(conn, keys, study, self.timeout_s)
                try:
                    yield
                finally:
                    conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:a, :b)"), keys)
                    conn.commit()
        finally:
            engine.dispose()

    def running_file(self, worker: str, study: str = "") -> RunningFile:
        """This worker's record of the trial of `study` it runs (a local storage; make it under
        `claiming`). Close it when the worker stops; a dead worker's is removed by `held`."""
        assert self.path is not None
        return RunningFile(self.path + _RUNNING, worker, study)

    def held(self, study: str | None = None) -> Held:
        """The trials of study `study` held by this machine's live workers and by dead ones,
        and the dead workers (`held_trials`; a local storage; call under `recovering`). Trial
        numbers restart in each study of a storage: a record of another study is not ours."""
        assert self.path is not None
        return held_trials(self.path + _RUNNING, study)

    def claiming(self) -> AbstractContextManager[None]:
        return self._flock() if self.path is not None else nullcontext()

    def recovering(self, study: str | None = None) -> AbstractContextManager[None]:
        """The study-wide lock: opening a study, its warm start and recovery, one at a time."""
        if self.path is not None:
            return self._flock()
        if self.server_url is not None:
            return self._advisory(study)
        return nullcontext()

    def refining(self, study: str | None = None) -> AbstractContextManager[None]:
        """The local search's lock: one refinement of a study at a time, so that two commands'
        workers climbing to the same optimum do not both enqueue it. On one machine a lock of
        its own (`<claims>.refine`): a climb takes tens of milliseconds, and under the claim
        lock every other worker's `ask` would wait for it."""
        if self.path is not None:
            return self._flock(".refine", "refine lock")
        return self.recovering(study)


def _int4(value: int) -> int:
    """An unsigned 32-bit hash as PostgreSQL's signed int4."""
    return value - (1 << 32) if value >= 1 << 31 else value


def _advisory_wait(conn: Any, keys: dict[str, int], study: str | None,
                   timeout_s: float) -> None:
    import sqlalchemy

    start = time.monotonic()
    take = sqlalchemy.text("SELECT pg_try_advisory_lock(:a, :b)")
    while not conn.execute(take, keys).scalar():
        waited = time.monotonic() - start
        if waited > timeout_s:
            who = conn.execute(sqlalchemy.text(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                "classid = (:a)::bigint & 4294967295 AND objid = (:b)::bigint & 4294967295"),
                keys).scalar()
            raise IpuTuneError(
                f"study {study!r}: its lock on the database server is held by server process "
                f"{who} for {waited:.0f} s (a stopped client?); end that session "
                "(pg_terminate_backend) or try again later")
        time.sleep(0.1)
