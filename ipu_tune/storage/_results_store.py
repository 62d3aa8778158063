"""`ResultsStore`: the results table of a study's storage, and its copy as Parquet or CSV."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ipu_tune._escape import spreadsheet_cell
from ipu_tune._own_files import is_results_table
from ipu_tune.errors import IpuTuneError, disk_fault, disk_hint
from ipu_tune.files import atomic_write
from ipu_tune.knobs import KNOBS
from ipu_tune.storage._foreign import ForeignTable
from ipu_tune.storage._open import redact
from ipu_tune.storage._places import database_file
from ipu_tune.storage._results_table import (
    COLUMN_NAMES,
    TABLE_NAME,
    ResultsTable,
    fit_int64,
    open_table,
    sqlite_path,
)
from ipu_tune.storage._url import damaged, damaged_hint

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ResultsStore", "export_table"]

_T = TypeVar("_T")


class ResultsStore:
    """The `ipu_tune_results` table in the study's database (or a journal's in results_dir).

    Rows come from `ipu_tune.records.row_from_trial`. pandas (~0.5 s) loads only for `frame`.
    A results file of ipu-tune's own that SQLite finds damaged, when it is opened or by any
    later query, is moved aside and made anew (`_set_aside`), and refilled from the studies
    this store was synced with (`refill_with`): the table is a copy of them.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._refills: dict[str, Callable[[], object]] = {}
        self._rebuilding = False
        self._table = self._open()

    def _open(self) -> ResultsTable:
        path = sqlite_path(self.url)
        seen = _identity(path)  # the file found damaged, not one another process made since
        try:
            try:
                table = open_table(self.url)
            except ForeignTable as exc:
                if not exc.own or not _set_aside(self.url, f"holds a table {TABLE_NAME} that "
                                                           f"is not ipu-tune's ({exc.why})", seen):
                    raise IpuTuneError(
                        f"results store {redact(self.url)!r}: its table {TABLE_NAME} is not "
                        f"ipu-tune's ({exc.why}); allowed: ipu-tune's table (rename or drop "
                        "that one: ipu-tune makes its own and fills it from the studies)"
                    ) from None
                table = open_table(self.url)  # a new table; `sync_results` refills it
            except Exception as exc:
                why = damaged(exc)
                if why is None or not _set_aside(self.url, _damage(why), seen):
                    raise
                table = open_table(self.url)
        except IpuTuneError:
            raise
        except Exception as exc:
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            first = detail[0] if detail else type(exc).__name__
            raise IpuTuneError(
                f"results store {redact(self.url)!r}: cannot open ({first}){damaged_hint(first)}",
                fault=disk_fault(exc) is not None) from None
        self._seen = _identity(path)
        return table

    def refill_with(self, study_name: str, refill: Callable[[], object]) -> None:
        """`refill` puts the study's rows back in a table made anew (`sync_results`)."""
        self._refills[study_name] = refill

    def _guarded(self, op: Callable[[ResultsTable], _T]) -> _T:
        """`op` on the table; when SQLite finds the file damaged (a page the open did not
        read), it is moved aside and made anew as at the open, refilled, and `op` runs again,
        once: a damaged copy of the studies stops no command. A file another process moved
        aside since this one opened it is left for the new one first: rows written to the
        old file would be missing from the table everyone else reads."""
        path = sqlite_path(self.url)
        if self._seen is not None and not _same(self._seen, _identity(path)):
            self._reopen()
        try:
            return op(self._table)
        except Exception as exc:
            why = damaged(exc)
            if why is None or self._rebuilding:
                raise
            self._table.close()  # before the move: SQLite unlinks its -wal by name on close
            if not _set_aside(self.url, _damage(why), self._seen):
                raise
        self._reopen()
        return op(self._table)

    def _reopen(self) -> None:
        """The table opened again (made anew when moved aside) and refilled (`refill_with`)."""
        self._table.close()
        self._table = self._open()
        self._rebuilding = True
        try:
            for refill in list(self._refills.values()):  # a refill registers itself again
                refill()
        finally:
            self._rebuilding = False

    def _do(self, what: str, op: Callable[[ResultsTable], _T]) -> _T:
        """`op` guarded (`_guarded`), any error of it one line (`_failed`); a full or
        read-only disk under a write names the table's file (SQLite names none)."""
        try:
            return self._guarded(op)
        except IpuTuneError:
            raise
        except Exception as exc:
            file = database_file(self.url)  # a SQLite table's file, as the OS names it
            found = disk_fault(exc, repr(str(file)) if file else repr(redact(self.url)))
            if what == "write" and found is not None:
                raise IpuTuneError(f"{found}; {disk_hint(found)}", fault=True) from None
            raise self._failed(what, exc) from None

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Insert rows in one statement; rows already there (same study and trial) stay."""
        if rows:
            rows = fit_int64(rows)
            self._do("write", lambda table: table.insert(rows))

    def _failed(self, what: str, exc: Exception) -> IpuTuneError:
        """One line for a table that took a row or a read badly after it was opened (another
        process changed it since; damaged, and not ipu-tune's own file to move)."""
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        first = detail[0] if detail else type(exc).__name__
        again = damaged_hint(first) or ("; it is a copy of the studies: run the same command "
                                        "again to rebuild it")
        return IpuTuneError(
            f"results store {redact(self.url)!r}: cannot {what} its table {TABLE_NAME} "
            f"({first}){again}", fault=disk_fault(exc) is not None)

    def trial_numbers(self, study_name: str) -> list[int]:
        return self._do("read", lambda table: table.trial_numbers(study_name))

    def rows(self, study_name: str | None = None) -> list[dict[str, Any]]:
        """The table's rows (column -> value, without the row id), by study and trial."""
        return self._do("read", lambda table: table.rows(study_name))

    def frame(self, study_name: str | None = None) -> pd.DataFrame:
        """The rows as a DataFrame (the `export` and `trials` commands)."""
        import pandas as pd

        rows = self.rows(study_name)
        names = list(COLUMN_NAMES)
        names += [n for n in (rows[0] if rows else {}) if n not in names]  # unknown columns
        return pd.DataFrame.from_records(rows, columns=names, coerce_float=True)

    def studies(self) -> Iterable[str]:
        return self._do("read", lambda table: table.studies())

    def close(self) -> None:
        self._table.close()


def _identity(path: str | None) -> os.stat_result | None:
    """The file at `path` now (None: none, or no file)."""
    try:
        return os.stat(path) if path is not None else None
    except OSError:
        return None


def _unused(name: str) -> str:
    """`name`, else `name.N` with the first N no file holds: a process that moves two files
    aside in one second (`report` after a rebuild) must not replace the first (a rename
    replaces its target)."""
    found, n = name, 0
    while os.path.lexists(found):
        n += 1
        found = f"{name}.{n}"
    return found


def _same(seen: os.stat_result, now: os.stat_result | None) -> bool:
    return now is not None and os.path.samestat(seen, now)


def _damage(why: str) -> str:
    """What the warning line says of a file SQLite found damaged (`why`: its words)."""
    return "is not a SQLite database" if "not a database" in why else f"is damaged ({why})"


def _set_aside(url: str, what: str, seen: os.stat_result | None) -> bool:
    """Move a results file of ipu-tune's own (`results.db`, `results@<tag>.db`) that `what`
    (is no SQLite database, or damaged: cut short, overwritten; holds a table that is not
    ipu-tune's) aside as `<file>.bad-<UTC time>-<pid>`, with one line on stderr: the table is a
    copy of the studies, rebuilt from them, so a corrupt copy must not stop a run. Under a
    `flock` of the file, once: a process that comes second finds it moved, or finds another
    file than the one it saw (`seen`) there, made anew since (False when it cannot be moved,
    or is no file of ipu-tune's own: a study database is never moved)."""
    path = sqlite_path(url)
    if path is None or not is_results_table(Path(path).name):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return True  # moved by another process since: open the new one
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not os.path.exists(path) or not os.path.samestat(os.fstat(fd), os.stat(path)) or (
                seen is not None and not os.path.samestat(seen, os.fstat(fd))):
            return True  # another process moved it (and made a new one) while this one waited
        aside = _unused(
            f"{path}.bad-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}")
        try:
            os.rename(path, aside)
        except OSError:
            return False  # a read-only folder: the line names the file
        for suffix in ("-wal", "-shm", "-journal"):  # of the old file; useless to a new one
            with contextlib.suppress(OSError):
                os.rename(path + suffix, aside + suffix)
    finally:
        os.close(fd)
    print(f"ipu-tune: results table {path!r} {what}; moved it to {aside!r}; its rows are "
          "rebuilt from the studies", file=sys.stderr)
    return True


# Store columns held as JSON text (lists) and ISO 8601 text (times) in the SQL table.
_LIST_COLUMNS = ("values", "memory_per_ipu", *(k.column for k in KNOBS if k.sql == "json"))
_TIME_COLUMNS = ("started_at", "finished_at")


def _from_json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else None


def typed_table(frame: Any) -> Any:
    """The results table with lists as lists and times as timestamps (not their text)."""
    import pandas as pd

    out = frame.copy()
    for name in _LIST_COLUMNS:
        if name in out.columns:
            out[name] = out[name].map(_from_json)
    for name in _TIME_COLUMNS:
        if name in out.columns:
            # Optuna records naive local times: they stay naive (no invented offset).
            out[name] = pd.to_datetime(out[name], format="ISO8601")
    if "extra" in out.columns:  # free-form JSON: one text column, whatever its keys
        out["extra"] = out["extra"].map(lambda v: None if v is None else json.dumps(v))
    return out


def csv_text(frame: Any, **options: Any) -> str:
    """`frame` as CSV text (no index) for every CSV ipu-tune writes: a text cell a spreadsheet
    would evaluate (`=`, `+`, `-`, `@` first: a stored bottleneck, reason or worker) is written
    as plain text (`ipu_tune._escape.spreadsheet_cell`), and every text is quoted (a carriage
    return in an unquoted cell would start a row of its own)."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    safe = frame.copy()
    safe.columns = [spreadsheet_cell(str(n)) for n in safe.columns]  # a study's metric names
    for name in safe.columns:
        if is_object_dtype(safe[name]) or is_string_dtype(safe[name]):
            safe[name] = safe[name].map(spreadsheet_cell)
    return str(safe.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC, **options))


def _named_objectives(table: Any, metrics: Sequence[str]) -> Any:
    """`table` with a column per objective after ``values``, named by its Optuna metric name
    (the quantity and its unit: ``latency per call [s]``), holding that objective's value."""
    if "values" not in table.columns:
        return table
    at = list(table.columns).index("values") + 1
    for i, metric in enumerate(metrics):
        if metric not in table.columns:
            column = table["values"].map(
                lambda v, i=i: float(v[i]) if v is not None and i < len(v) else None)
            table.insert(at + i, metric, column.astype("float64"))
    return table


def export_table(frame: Any, path: Path, metrics: Sequence[str] = ()) -> Path:
    """Write the results table as Parquet or CSV, chosen by the file suffix; `metrics`: the
    study's objectives' metric names, in the order of ``values`` (a column each).

    Parquet keeps the types: list columns as lists, times as timestamps. CSV has no types, so
    lists are written as JSON arrays and times in ISO 8601.
    """
    if path.suffix == ".parquet":
        import io

        buf = io.BytesIO()
        _named_objectives(typed_table(frame), metrics).to_parquet(buf, index=False)
        return atomic_write(path, buf.getvalue(), key="--output")
    if path.suffix == ".csv":
        table = _named_objectives(typed_table(frame), metrics)
        for name in _LIST_COLUMNS:
            if name in table.columns:
                table[name] = table[name].map(lambda v: None if v is None else json.dumps(v))
        return atomic_write(path, csv_text(table, date_format="%Y-%m-%dT%H:%M:%S.%f"),
                            key="--output")
    raise IpuTuneError(f"--output={str(path)!r}: allowed suffixes: .parquet, .csv")
