"""A journal opened to be read only: never repaired, locked or written.

The commands that read a study (`studies`, `trials`, `explain`, `export`, `report`) must not
change the journal, even to repair it: the tuner repairs it before it appends
(`ipu_tune.storage._torn`). They read past what it would move aside - a line that is no
journal record (garbage, NUL bytes, the torn start of a fused line, whose whole records they
read as the repair keeps them), in the middle or last, and a torn last record - with one line on
stderr saying what the tuner says of it (`_torn.damage`). A tail without its newline may be
another process's append in progress: a whole record is read (the repair keeps it, adding the
newline); a partial one is called torn only when it is still there, unchanged, a moment later.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage._torn import check_journal, damage, line_records, record

__all__ = ["read_journal"]


# How long a partial last line is given to end before it is called torn: an append is one
# write() under the journal's lock, done in well under this.
SETTLE_S = 0.2


class _ReadingBackend(JournalFileBackend):
    """Optuna's journal file as its records, read past any line that is no record."""

    def __init__(self, path: str) -> None:  # not Optuna's: it makes a missing file
        self._file_path = path
        self._read_to = (0, 0)  # records read, and the byte offset after them
        self._bad: set[int] = set()  # offsets of the lines that are no record
        self._torn = 0  # bytes of a torn last record (0: none)
        self._judged = (-1, False)  # the file size a partial tail was judged at, and torn
        self._said = False

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        number, offset = self._read_to if log_number_from >= self._read_to[0] else (0, 0)
        with open(self._file_path, "rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # whole lines; the tail after them is judged below
        at = 0
        for line in data[:end].split(b"\n")[:-1]:
            found, whole = line_records(line)  # a fused line's whole ones, as repair keeps
            if not whole:
                self._bad.add(offset + at)
            for log in found:
                if number >= log_number_from:
                    yield log
                number += 1
            at += len(line) + 1
        self._read_to = (number, offset + end)
        tail = data[end:]
        last = record(tail) if tail else None
        if last is not None and number >= log_number_from:  # only its newline is missing
            yield last  # numbered as the next read numbers it again: the offset stays before
        self._torn = len(tail) if tail and last is None and self._stays(
            offset + len(data)) else 0
        if (self._bad or self._torn) and not self._said:
            self._said = True
            print(f"ipu-tune: journal {self._file_path!r} holds "
                  f"{damage(len(self._bad), self._torn)}; read past them and left the journal "
                  "as it is (the tuner moves them aside when it next runs on it)",
                  file=sys.stderr)

    def _stays(self, size: int) -> bool:
        """Whether the journal, `size` bytes long and ending inside a line, still is a moment
        later: a torn record, not an append in progress (judged once per size: Optuna reads
        the journal again on every query)."""
        if self._judged[0] != size:
            time.sleep(SETTLE_S)
            try:
                torn = os.stat(self._file_path).st_size == size
            except OSError:
                torn = False
            self._judged = (size, torn)
        return self._judged[1]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise IpuTuneError(f"journal {self._file_path!r}: opened to be read only; nothing was "
                           "written to it")


def read_journal(path: Path, key: str) -> BaseStorage:
    """The journal at `path` (named by the option `key`) to read, as it is."""
    check_journal(path)
    if not path.is_file():
        raise IpuTuneError(f"{key}={str(path)!r}: no such journal")
    try:
        return JournalStorage(_ReadingBackend(str(path)))
    except OSError as exc:
        raise IpuTuneError(f"{key}={str(path)!r}: cannot be read ({exc.strerror})") from None
    except Exception as exc:
        raise IpuTuneError(
            f"{key}={str(path)!r}: cannot read the journal file ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); it is corrupted or not an "
            "Optuna journal") from None
