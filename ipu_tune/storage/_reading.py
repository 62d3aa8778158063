"""A journal opened to be read only: never repaired, locked or written.

The commands that read a study (`studies`, `trials`, `explain`, `export`, `report`) must not
change the journal, even to repair it: the tuner repairs it before it appends
(`ipu_tune.storage._torn`). They read past what it would move aside - a line that is no
journal record (garbage, NUL bytes, the torn start of a fused line, whose whole records they
read as the repair keeps them), in the middle or last - with one line on stderr saying so, and a
tail without its newline, which may be a write in progress, without a word.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage._torn import check_journal, line_records

__all__ = ["read_journal"]


class _ReadingBackend(JournalFileBackend):
    """Optuna's journal file as its records, read past any line that is no record."""

    def __init__(self, path: str) -> None:  # not Optuna's: it makes a missing file
        self._file_path = path
        self._read_to = (0, 0)  # records read, and the byte offset after them
        self._bad: set[int] = set()  # offsets of the lines that are no record
        self._said = False

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        number, offset = self._read_to if log_number_from >= self._read_to[0] else (0, 0)
        with open(self._file_path, "rb") as f:
            f.seek(offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # whole lines only: a tail without its newline waits
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
        if self._bad and not self._said:
            self._said = True
            print(f"ipu-tune: journal {self._file_path!r} holds {len(self._bad)} line(s) that "
                  "are no journal record; read past them and left the journal as it is (the "
                  "tuner moves them aside when it next runs on it)", file=sys.stderr)

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
