"""A journal is recognised before it is touched, and bad records are moved aside, not fatal.

Recognition: a file given as a journal must be empty (new) or begin with the record Optuna's
`JournalStorage` writes first (`{"op_code": 0, ...}`, create-study); anything else (a SQLite
file, a log, a symlinked text file, a FIFO) is refused unopened for writing and unchanged.

Repair, under the journal's own lock (no writer is mid-append then):
- a tail without its newline is either a complete JSON record (the newline alone was lost:
  restore it) or a torn one (a full disk or a kill during `append_logs`; cut it, keeping the
  bytes as `<journal>.torn-<UTC time>`). Left there, the next append would fuse with it into one
  invalid line in the middle of the file. So every append first checks, under the lock, that
  the journal ends in a newline (`ends_torn`): a worker SIGKILLed mid-`write` leaves a torn
  record while the others run on (Linux stops a write of more than a page at a fatal signal);
- a line in the middle that is no journal record (garbage, empty, NUL bytes, an unknown op
  code) makes Optuna refuse the whole study: it is moved into `<journal>.bad-<UTC time>` and
  the journal keeps every other record, readable by Optuna again. One line on stderr says so.
  So is such a last line (NUL bytes and a newline after a machine crash): Optuna reads past
  it, but the next append would put it in the middle, where the next read fails;
- a torn record fused with the next append (one line, two record starts: what a writer killed
  mid-write left before appends checked the tail, or a plain Optuna writer leaves): the whole
  records after its torn start stay in place (`line_records`), the torn bytes are moved aside.

Only a process that writes repairs: commands that read a study read past such lines as they are
and say what the repair would move, in the same words (`damage`; `ipu_tune.storage._reading`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from tqdm import tqdm

from ipu_tune.errors import IpuTuneError
from ipu_tune.files import atomic_write
from ipu_tune.storage._journal_lock import FlockLock

__all__ = [
    "begins_as_journal", "check_journal", "damage", "ends_torn", "line_records", "record",
    "repair_locked", "repair_torn_tail",
]

_FIRST_LINE_BYTES = 1 << 20
_OP_CODES = range(11)  # optuna.storages.journal JournalOperation: CREATE_STUDY .. DISCARD_TRIALS


def record(line: bytes) -> dict[str, Any] | None:
    """The journal record `line` holds (a JSON object with a known op code and a worker id),
    else None."""
    try:
        data = json.loads(line)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    if not isinstance(data, dict) or b"\x00" in line:
        return None
    op = data.get("op_code")
    ok = type(op) is int and op in _OP_CODES and isinstance(data.get("worker_id"), str)
    return data if ok else None


def _is_record(line: bytes, first: bool = False) -> bool:
    """A journal record (`first`: the create-study record that opens every journal)."""
    data = record(line)
    return data is not None and (not first or (
        data["op_code"] == 0 and isinstance(data.get("study_name"), str)))


def _unreadable(path: Path, exc: OSError) -> IpuTuneError:
    return IpuTuneError(f"study.storage={str(path)!r}: cannot be read ({exc.strerror})")


def begins_as_journal(path: Path) -> bool:
    """Whether the file at `path` begins with the create-study record every journal begins
    with (False when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return _is_record(f.readline(_FIRST_LINE_BYTES).rstrip(b"\n"), first=True)
    except OSError:
        return False


def check_journal(path: Path) -> None:
    """Refuse, without writing anything, a file that is not an Optuna journal."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise IpuTuneError(f"study.storage={str(path)!r}: not a regular file; allowed: an "
                           "Optuna journal file or a new path")
    if st.st_size == 0:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            first = f.readline(_FIRST_LINE_BYTES).rstrip(b"\n")
    except OSError as exc:
        raise _unreadable(path, exc) from None
    if not _is_record(first, first=True):
        raise IpuTuneError(
            f"study.storage={str(path)!r}: not an Optuna journal (its first line is not the "
            "create-study record a journal begins with); refused and left unchanged; allowed: "
            "an Optuna journal file or a new path")


def _stamp(path: Path, kind: str) -> Path:
    """A backup name nothing is at yet: appends repair as they go, so one process may repair
    twice in a second, and a backup never replaces another (nor anything else of that name)."""
    when = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = path.with_name(f"{path.name}.{kind}-{when}-{os.getpid()}")
    name, n = base, 1
    while os.path.lexists(name):
        n += 1
        name = base.with_name(f"{base.name}-{n}")
    return name


# A line that does not look like a record as Optuna writes it: found in one C-speed pass over
# the file (a sound journal has none), then judged by a JSON parse (`_is_record`).
_SUSPECT = re.compile(
    rb'^(?!\{"op_code":(?:10|[0-9]),"worker_id":"[^\n\x00]*\}$)[^\n]*$', re.MULTILINE)
# A record's start: never inside a JSON string (its quotes are escaped there), so a line holding
# two is a torn record fused with the next append (a writer killed mid-write by an older
# ipu-tune, or a plain Optuna writer): it looks like a record at both ends.
_START = b'{"op_code":'
_FUSED = re.compile(rb'^[^\n]*\{"op_code":[^\n]*\{"op_code":[^\n]*$', re.MULTILINE)


def _suspects(data: bytes, end: int) -> list[tuple[int, int]]:
    """(start, end) of the lines of `data[:end]` that may be no record, in order (not the
    empty match at `end` itself, where no line begins)."""
    found = {(m.start(), m.end()) for m in _SUSPECT.finditer(data, 0, end) if m.start() < end}
    if data.count(_START, 0, end) > data.count(b"\n", 0, end):  # some line holds two
        found |= {(m.start(), m.end()) for m in _FUSED.finditer(data, 0, end)}
    return sorted(found)


def _pieces(line: bytes) -> list[bytes]:
    """The whole records a line that is no record holds (a fused line's, after its torn start)."""
    return [p for p in (_START + q for q in line.split(_START)[1:]) if _is_record(p)]


def line_records(line: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The records of one journal line as the repair keeps them (the line's own, the whole ones
    a fused line holds, or none), and whether the line is one whole record."""
    found = record(line)
    if found is not None:
        return [found], True
    return [r for r in map(record, _pieces(line)) if r is not None], False


def _salvaged(line: bytes) -> tuple[bytes, bytes]:
    """(records kept, bytes moved aside) of a bad line: the whole records a fused line holds
    after its torn start stay in the journal, in place; the rest is moved aside."""
    kept = _pieces(line)
    cut = line
    for p in kept:
        cut = cut.replace(p, b"", 1)
    return b"".join(p + b"\n" for p in kept), cut


def _plan(data: bytes) -> tuple[int, bytes, bytes, list[bytes]]:
    """(offset to rewrite from, bytes to write there, torn tail cut, bad bytes moved) of the
    lines in `data`; an offset of -1 when they are sound. A bad last line counts as one in the
    middle: Optuna reads past it, but the next append puts it in the middle."""
    body_end = data.rfind(b"\n") + 1
    tail = data[body_end:]
    whole_tail = bool(tail) and _is_record(tail)
    torn = tail if tail and not whole_tail else b""
    fixed_tail = tail + b"\n" if whole_tail else b""  # only its newline was lost
    bad = [(a, b) for a, b in _suspects(data, body_end) if not _is_record(data[a:b])]
    if not bad:
        return (body_end if tail else -1), fixed_tail, torn, []
    keep, moved, at = [], [], bad[0][0]
    for start, end in bad:
        kept, cut = _salvaged(data[start:end])
        keep += [data[at:start], kept]
        moved.append(cut)
        at = end + 1
    keep.append(data[at:body_end])
    return bad[0][0], b"".join(keep) + fixed_tail, torn, moved


_TAIL_BYTES = 1 << 18


def _read_for_plan(f: BinaryIO, whole: bool) -> tuple[bytes, int]:
    """(bytes to plan on, their offset in the file): the whole file, or only its end (a torn
    tail or a bad last line is judged by the lines of the end; a sound journal needs no full
    read, ~0.1 s per 7 MB)."""
    size = os.fstat(f.fileno()).st_size
    start = 0 if whole else max(0, size - _TAIL_BYTES)
    f.seek(start)
    data = f.read()
    if start:  # plan from the first line boundary inside the chunk
        first = data.find(b"\n") + 1
        if first == 0:  # one line longer than the chunk: read it all
            return _read_for_plan(f, True)
        return data[first:], start + first
    return data, 0


def damage(bad_lines: int, torn_bytes: int) -> str:
    """What a journal holds that is no record, as the tuner and the reading commands say it:
    `bad_lines` lines that are no record, a torn last record of `torn_bytes` (0: none)."""
    what = f"{bad_lines} line(s) that are no journal record" if bad_lines else ""
    return what + (" and " if bad_lines and torn_bytes else "") + (
        f"a torn last record ({torn_bytes} bytes: a writer killed mid-write, or a full disk)"
        if torn_bytes else "")


def ends_torn(fd: int) -> bool:
    """Whether the journal open at `fd` (for reading) ends inside a line: its last writer was
    killed mid-write (call holding the lock: no live writer is mid-append then)."""
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def repair_torn_tail(path: Path, whole: bool = False) -> Path | None:
    """Recognise the journal at `path`, then repair its end in place (`whole`: every line,
    which reads the whole file: after Optuna failed to read it); returns the backup file of
    the bytes cut or moved (None when nothing was)."""
    check_journal(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    lock = FlockLock(str(path))
    lock.acquire()
    try:
        return repair_locked(path, whole)
    finally:
        lock.release()


def repair_locked(path: Path, whole: bool = False) -> Path | None:
    """`repair_torn_tail` for a caller that holds the journal's lock."""
    with path.open("r+b") as f:
        data, offset = _read_for_plan(f, whole)
        cut, write, torn, bad = _plan(data)
        if cut < 0:
            return None
        cut += offset
        backup = _stamp(path, "bad" if bad else "torn")
        if torn or bad:  # kept before the journal changes: a full disk loses nothing
            atomic_write(backup, b"".join(line + b"\n" for line in bad) + torn,
                         key="journal backup")
        f.seek(cut)
        f.write(write)
        f.truncate()
        f.flush()
        os.fsync(f.fileno())
    if not torn and not bad:
        return None
    what = damage(len(bad), len(torn))
    # On a line of its own: the trials bar (of this or the main process) may be on the
    # terminal's current line, with no newline after it.
    start = "\r\x1b[K" if sys.stderr.isatty() else ""
    tqdm.write(f"{start}ipu-tune: journal {str(path)!r} held {what}; moved them to "
               f"{str(backup)!r}, every other record is kept", file=sys.stderr)
    return backup
