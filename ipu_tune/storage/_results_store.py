"""`ResultsStore`: the results table of a study's storage, and its copy as Parquet or CSV."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import sqlite3
import stat
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ResultsStore", "export_table"]


class ResultsStore:
    """The `ipu_tune_results` table in the study's database (or a journal's in results_dir).

    Rows come from `ipu_tune.records.row_from_trial`. pandas (~0.5 s) loads only for `frame`.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        try:
            try:
                self._table: ResultsTable = open_table(url)
            except ForeignTable as exc:
                if not exc.own or not _set_aside(url, f"holds a table {TABLE_NAME} that is not "
                                                      f"ipu-tune's ({exc.why})"):
                    raise IpuTuneError(
                        f"results store {redact(url)!r}: its table {TABLE_NAME} is not "
                        f"ipu-tune's ({exc.why}); allowed: ipu-tune's table (rename or drop "
                        "that one: ipu-tune makes its own and fills it from the studies)"
                    ) from None
                self._table = open_table(url)  # a new table; `sync_results` refills it
            except sqlite3.DatabaseError as exc:
                if "file is not a database" not in str(exc) or not _set_aside(
                        url, "is not a SQLite database"):
                    raise
                self._table = open_table(url)
        except IpuTuneError:
            raise
        except Exception as exc:
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise IpuTuneError(
                f"results store {redact(url)!r}: cannot open "
                f"({detail[0] if detail else type(exc).__name__})",
                fault=disk_fault(exc) is not None) from None

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Insert rows in one statement; rows already there (same study and trial) stay. A
        full or read-only disk is one line naming the table's database (SQLite names none)."""
        if not rows:
            return
        try:
            self._table.insert(fit_int64(rows))
        except Exception as exc:
            file = database_file(self.url)  # a SQLite table's file, as the OS names it
            found = disk_fault(exc, repr(str(file)) if file else repr(redact(self.url)))
            if found is None:
                raise self._failed("write", exc) from None
            raise IpuTuneError(f"{found}; {disk_hint(found)}", fault=True) from None

    def _failed(self, what: str, exc: Exception) -> IpuTuneError:
        """One line for a table that took a row or a read badly after it was opened (another
        process changed it since)."""
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return IpuTuneError(
            f"results store {redact(self.url)!r}: cannot {what} its table {TABLE_NAME} "
            f"({detail[0] if detail else type(exc).__name__}); it is a copy of the studies: "
            "run the same command again to rebuild it", fault=disk_fault(exc) is not None)

    def trial_numbers(self, study_name: str) -> list[int]:
        try:
            return self._table.trial_numbers(study_name)
        except Exception as exc:
            raise self._failed("read", exc) from None

    def rows(self, study_name: str | None = None) -> list[dict[str, Any]]:
        """The table's rows (column -> value, without the row id), by study and trial."""
        try:
            return self._table.rows(study_name)
        except Exception as exc:
            raise self._failed("read", exc) from None

    def frame(self, study_name: str | None = None) -> pd.DataFrame:
        """The rows as a DataFrame (the `export` and `trials` commands)."""
        import pandas as pd

        rows = self.rows(study_name)
        names = list(COLUMN_NAMES)
        names += [n for n in (rows[0] if rows else {}) if n not in names]  # unknown columns
        return pd.DataFrame.from_records(rows, columns=names, coerce_float=True)

    def studies(self) -> Iterable[str]:
        return self._table.studies()

    def close(self) -> None:
        self._table.close()


def _set_aside(url: str, what: str) -> bool:
    """Move a results file of ipu-tune's own (`results.db`, `results@<tag>.db`) that `what`
    (is no SQLite database: overwritten, truncated in its header; holds a table that is not
    ipu-tune's) aside as `<file>.bad-<UTC time>-<pid>`, with one line on stderr: the table is a
    copy of the studies, rebuilt from them, so a corrupt copy must not stop a run. Under a
    `flock` of the file, once: a process that comes second finds it moved (False when it
    cannot be moved, or is no file of ipu-tune's own: a study database is never moved)."""
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
        if not os.path.exists(path) or not os.path.samestat(os.fstat(fd), os.stat(path)):
            return True  # another process moved it while this one waited
        aside = f"{path}.bad-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
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
