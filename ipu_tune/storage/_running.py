"""Which trials the live workers of one machine run, kept beside the study, not in it.

Each worker keeps one small file in a folder beside the storage (`<storage>.claims.running/`),
locked with `flock` for as long as the worker lives, holding the number of the trial it runs and
its name. The kernel drops the lock when the process dies, however it dies, so a RUNNING trial
that no locked file names belongs to a dead worker. Telling them apart this way costs a write
to a page-cache file per trial instead of a tag on the trial, which is a storage write (an
fsync'd journal append, 0.4-0.6 ms).

Files are made, written and read under the claim lock (`ClaimLock`), so recovery never sees a
live worker between its `ask` and its record, nor a file made but not yet locked. A worker killed
between the two leaves its file unlocked, naming no trial or its previous one: the RUNNING trial
no file names is then that dead worker's (`Held.gone`), not one whose worker closed its file on
an error. Local file systems only, like the claim lock itself.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import uuid
from contextlib import suppress
from typing import NamedTuple

from ipu_tune.errors import IpuTuneError

__all__ = ["Held", "RunningFile", "held_trials"]

_MAX_RECORD_BYTES = 4096
_NAME = re.compile(r"[0-9]+-[0-9a-f]{12}")  # a worker's file: its PID and a random part


class RunningFile:
    """One worker's record: its file stays locked until `close` or the process's death."""

    def __init__(self, directory: str, worker: str, study: str = "") -> None:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:  # a file (or a dangling link) where the folder belongs
            raise IpuTuneError(f"claims folder {directory!r}: cannot be made ({exc.strerror}); "
                               "remove what is there") from None
        self.path = os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")  # _NAME
        self._worker = worker
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        except OSError:
            os.close(fd)
            raise
        self._fd: int | None = fd
        self._held: tuple[int, str] | None = None
        self._keep = False  # `stopped`: the record stays for the recovery
        try:  # who the file is, before any trial: a kill before the first `hold` names it
            self._write(f"-\n{study}\n{worker}\n")
        except OSError:
            self.close()
            raise

    def hold(self, number: int, study: str = "", cause: str = "") -> None:
        """This worker now runs trial `number` of `study` (it ran no other since it asked);
        `cause`: why it stopped in that trial without storing it (`stopped`)."""
        self._held = (number, study)
        self._write(f"{number}\n{study}\n{self._worker}\n{cause}")

    def _write(self, text: str) -> None:
        assert self._fd is not None
        data = text.encode()[:_MAX_RECORD_BYTES]
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def stopped(self, cause: str) -> None:
        """The worker stops in its trial on an error it could not store (a full disk): the
        record keeps `cause` and outlives the worker, so the recovery fails the trial with it,
        not as a worker that died. Rewritten within the file's first block: a full disk takes
        it."""
        if self._fd is None or self._held is None:
            return
        with suppress(OSError):
            self.hold(*self._held, cause=" ".join(cause.split()))
            self._keep = True

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            if not self._keep:
                with suppress(FileNotFoundError):
                    os.unlink(self.path)
            os.close(fd)  # drops the lock


def _read(path: str) -> tuple[bool, str] | None:
    """(held by a live process, text) of one record; None for anything that is not a regular
    file (a FIFO would block a plain open, a folder cannot be locked): not ours, skipped.
    A dead record is removed by the caller once it knows it is of the study recovered."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alive = False
        except BlockingIOError:
            alive = True
        return alive, os.read(fd, _MAX_RECORD_BYTES).decode(errors="replace")
    finally:
        os.close(fd)


def _parse(text: str) -> tuple[int | None, str, str, str] | None:
    """(number, study, worker, cause) of a record, number None before the worker's first trial;
    `number worker` of earlier versions has study '' and no cause."""
    lines = text.split("\n", 3)
    if len(lines) >= 3 and (lines[0].isdigit() or lines[0] == "-"):
        number = int(lines[0]) if lines[0].isdigit() else None
        return number, lines[1], lines[2], (lines[3] if len(lines) > 3 else "").strip()
    number_text, _, worker = text.strip().partition(" ")
    return (int(number_text), "", worker, "") if number_text.isdigit() else None


class Held(NamedTuple):
    """What the workers' files of one study say (`held_trials`)."""

    live: dict[int, str]  # trial number -> the live worker that runs it
    dead: dict[int, tuple[str, str]]  # trial number -> (dead worker, the cause it gave)
    # Every dead worker's name, whatever its file named (no trial: killed before its first
    # `hold`; a finished one: killed between its next `ask` and `hold`).
    gone: list[str]


def held_trials(directory: str, study: str | None = None) -> Held:
    """The trials of `study` named by live workers' files and by dead workers' files, which
    are removed (a worker that stopped on an error it could not store gave its `cause`; a
    killed one none). Call under the claim lock. With `study` None, every record; another
    study's dead records stay for its recovery. An empty dead file of a worker's name (made by a
    worker killed at once) is a dead worker of any study, known by its file's PID; a file of
    another name or content is nobody's record and stays."""
    held = Held({}, {}, [])
    try:
        names = os.listdir(directory)
    except OSError:  # missing, or a file where the folder belongs (RunningFile says so)
        return held
    for name in names:
        path = os.path.join(directory, name)
        found = _read(path)
        if found is None:
            continue
        record = _parse(found[1])
        if record is None:  # a worker's file killed before it was written, or not ours at all
            if found[0] or found[1] or not _NAME.fullmatch(name):
                continue
            record = None, "", f"pid {name.partition('-')[0]}", ""
        number, owner, worker, cause = record
        if study is not None and owner not in (study, ""):
            continue
        if found[0]:
            if number is not None:
                held.live[number] = worker
            continue
        if number is not None:
            held.dead[number] = (worker, cause)
        held.gone.append(worker)
        with suppress(FileNotFoundError):
            os.unlink(path)
    return held
