"""Which trials the live workers of one machine run, kept beside the study, not in it.

Each worker keeps one small file in a folder beside the storage (`<storage>.claims.running/`),
locked with `flock` for as long as the worker lives, holding the number of the trial it runs and
its name. The kernel drops the lock when the process dies, however it dies, so a RUNNING trial
that no locked file names belongs to a dead worker. Telling them apart this way costs a write
to a page-cache file per trial instead of a tag on the trial, which is a storage write (an
fsync'd journal append, 0.4-0.6 ms).

Files are made, written and read under the claim lock (`ClaimLock`), so recovery never sees a
worker between its `ask` and its record, nor a file made but not yet locked. Local file systems
only, like the claim lock itself.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from contextlib import suppress

__all__ = ["RunningFile", "held_trials"]

_MAX_RECORD_BYTES = 4096


class RunningFile:
    """One worker's record: its file stays locked until `close` or the process's death."""

    def __init__(self, directory: str, worker: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
        self._worker = worker
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        except OSError:
            os.close(fd)
            raise
        self._fd: int | None = fd

    def hold(self, number: int) -> None:
        """This worker now runs trial `number` (it ran no other since it asked for it)."""
        assert self._fd is not None
        data = f"{number} {self._worker}\n".encode()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with suppress(FileNotFoundError):
                os.unlink(self.path)
            os.close(fd)  # drops the lock


def held_trials(directory: str) -> tuple[dict[int, str], dict[int, str]]:
    """(trial number -> worker) named by live workers' files, and by dead workers' files,
    which are removed. Call under the claim lock."""
    live: dict[int, str] = {}
    dead: dict[int, str] = {}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return live, dead
    for name in names:
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, IsADirectoryError):
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alive = False
            except BlockingIOError:
                alive = True
            text = os.read(fd, _MAX_RECORD_BYTES).decode(errors="replace")
            if not alive:
                with suppress(FileNotFoundError):
                    os.unlink(path)
        finally:
            os.close(fd)
        number, _, worker = text.strip().partition(" ")
        if number.isdigit():
            (live if alive else dead)[int(number)] = worker
    return live, dead
