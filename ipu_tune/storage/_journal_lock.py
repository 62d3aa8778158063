"""File locks the kernel releases when their holder dies, with a time limit and a named holder.

Optuna's symlink/open-file locks leave a stale lock behind a SIGKILLed process and make the next
process wait out a grace period; `fcntl.flock` locks vanish with the process, so a killed study
resumes at once. A process that is stopped (Ctrl-Z, SIGSTOP) keeps its locks, though: a waiter
would hang forever. So every holder writes its PID into the lock file, and a waiter gives up
with one line naming it - after 2 s when the holder is stopped, after `timeout_s` otherwise.
Local file systems only (for NFS use Optuna's own locks or PostgreSQL).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

from optuna.storages.journal._file import BaseJournalFileLock

from ipu_tune._own_files import JOURNAL_LOCK_SUFFIX
from ipu_tune.errors import IpuTuneError

__all__ = ["FlockLock", "lock_fd", "unlock_fd"]

LOCK_TIMEOUT_S = 120.0
STOPPED_GRACE_S = 2.0
# A busy lock is polled (flock has no time limit of its own), first after 0.1 ms, then twice as
# long each time up to 20 ms: the journal's and the claim lock's holders keep them for
# microseconds to a millisecond, and a flat 20 ms sleep made two workers wait ~20 ms per
# collision, about 5% of their time.
_POLL_FIRST_S = 0.0001
_POLL_S = 0.02


def _holder(fd: int) -> tuple[int | None, str]:
    """(PID, state letter of /proc/PID/stat) written into the lock file by its holder."""
    try:
        text = os.pread(fd, 32, 0).decode(errors="replace").split()
        pid = int(text[0]) if text and text[0].isdigit() else None
        if pid is None:
            return None, "?"
        with open(f"/proc/{pid}/stat", "rb") as f:
            return pid, f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError, ValueError):
        return None, "?"


def lock_fd(path: str, what: str, timeout_s: float = LOCK_TIMEOUT_S) -> int:
    """Open `path` (a regular file, created when missing) and hold an exclusive flock on it;
    `IpuTuneError` naming the holder when it cannot within the time limit."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT):
            raise IpuTuneError(f"{what} {path!r}: cannot be made ({exc.strerror}); make its "
                               "folder writable, or choose another folder", fault=True) from None
        raise IpuTuneError(f"{what} {path!r}: cannot be opened ({exc.strerror}); allowed: a "
                           "regular file (remove what is there)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IpuTuneError(f"{what} {path!r}: not a regular file; remove it")
    start = time.monotonic()
    poll_s = _POLL_FIRST_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            waited = time.monotonic() - start
            # Who holds it matters only once the wait could end: not on the quick polls.
            pid, state = (_holder(fd) if waited > min(timeout_s, STOPPED_GRACE_S)
                          else (None, "?"))
            if waited > timeout_s or (state in ("T", "t") and waited > STOPPED_GRACE_S):
                os.close(fd)
                how = "stopped (Ctrl-Z; `fg` or `kill -CONT` it)" if state in ("T", "t") else "busy"
                who = f"process {pid}" if pid is not None else "another process"
                raise IpuTuneError(f"{what} {path!r}: held by {who}, {how}, for {waited:.0f} s; "
                                   "try again once it ends") from None
            time.sleep(poll_s)
            poll_s = min(2 * poll_s, _POLL_S)
    os.pwrite(fd, f"{os.getpid():<20}\n".encode(), 0)
    return fd


def unlock_fd(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


class FlockLock(BaseJournalFileLock):
    """The journal's lock, `<journal>.ipu_tune-lock`: not Optuna's `<journal>.lock`, which an
    Optuna client (optuna-dashboard) deletes as stale after 30 s (`JOURNAL_LOCK_SUFFIX`)."""

    def __init__(self, filepath: str) -> None:
        self._path = filepath + JOURNAL_LOCK_SUFFIX
        self._fd: int | None = None

    def acquire(self) -> bool:
        self._fd = lock_fd(self._path, "journal lock")
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            unlock_fd(fd)
