"""The results table: one append-only row per finished trial, in an SQL table.

A finished trial is COMPLETE (a feasible plan, with its objective values) or PRUNED (an
infeasible one: `ipu_tune.search.tell_outcome`). An infeasible trial's row has no objective
values (``values`` NULL), no throughput when the plan does not fit in memory (the simulator's
0.0 means "does not run", not a measured rate), ``feasible`` false and the ``reason``; its
memory per IPU, limit, plan and constraints (in ``extra``) are kept.

The row is derived from what the trial itself carries in the study (user attributes written
before `tell`: `ipu_tune.records.row_from_trial`), so the table can always be brought back in
line with the study: a process killed between `tell` and the insert leaves a finished trial
without a row, and the next `sync_results` of any worker inserts it. Inserts ignore rows
already there (unique study + trial).

Two tables implement `ResultsTable`: `_SqliteTable` (a plain SQLite file, through the standard
library) and `_RdbTable` (any SQLAlchemy URL: a database server).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from ipu_tune.knobs import KNOBS
from ipu_tune.storage._foreign import (
    PROBE_ROW,
    ForeignTable,
    probe,
    sa_own,
    sa_problem,
    sqlite_own,
    sqlite_problem,
)

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.engine import Engine

__all__ = [
    "COLUMN_NAMES", "PLAN_COLUMNS", "TABLE_NAME", "ResultsTable", "fit_int64", "open_table",
    "sqlite_path",
]

TABLE_NAME = "ipu_tune_results"

# A column's kind -> (SQLAlchemy type name, its arguments); SQLite's DDL type is derived from it
# exactly as SQLAlchemy's SQLite dialect writes it, so either path reads the other's tables.
_KINDS: dict[str, tuple[str, tuple[int, ...], str]] = {
    "int": ("Integer", (), "INTEGER"),
    "bigint": ("BigInteger", (), "BIGINT"),  # bytes exceed 2**31 on infeasible plans
    "float": ("Float", (), "FLOAT"),
    "bool": ("Boolean", (), "BOOLEAN"),
    "json": ("JSON", (), "JSON"),
    **{f"str{n}": ("String", (n,), f"VARCHAR({n})")
       for n in (8, 16, 32, 40, 64, 256, 512, 1000, 2000)},
}
# A knob's `sql` kind -> column kind ("json" there is a JSON list in text: pipeline splits).
_KNOB_KINDS = {"str8": "str8", "str16": "str16", "int": "int", "float": "float", "bool": "bool",
               "json": "str2000"}

# Plan knob columns (name, kind), in the order of `ipu_tune.knobs`.
PLAN_COLUMNS: tuple[tuple[str, str], ...] = tuple((k.column, _KNOB_KINDS[k.sql]) for k in KNOBS)

# The table's columns after its integer primary key `id`: (name, kind, not null).
_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("study", "str512", True),
    ("trial_number", "int", True),
    ("state", "str16", True),
    ("values", "str1000", False),
    ("throughput", "float", False),
    ("latency_s", "float", False),  # a call's, inputs on the host to results on the host
    ("fits", "bool", False),
    ("feasible", "bool", False),  # every constraint <= 0 (memory, global batch, floor)
    ("peak_memory_bytes", "bigint", False),
    ("memory_per_ipu", "str2000", False),
    ("memory_limit_bytes", "bigint", False),
    ("bottleneck", "str64", False),
    ("reason", "str1000", False),
    *((name, kind, False) for name, kind in PLAN_COLUMNS),
    ("model", "str256", False),
    ("ipu", "str16", False),
    ("num_ipus", "int", False),
    ("simulator_version", "str32", False),
    ("started_at", "str40", False),
    ("finished_at", "str40", False),
    ("extra", "json", False),
)
_UNIQUE = ("uq_ipu_tune_results_trial", ("study", "trial_number"))
COLUMN_NAMES: tuple[str, ...] = tuple(n for n, _, _ in _COLUMNS)
_INT_COLUMNS = tuple(n for n, k, _ in _COLUMNS if k in ("int", "bigint"))
_INT64 = (-(2**63), 2**63 - 1)


def fit_int64(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with each integer column inside the 64 bits SQLite and PostgreSQL hold: the peak
    memory of a model of absurd sizes (`vocab_size: 10**15` in a config.json) is stored as
    2**63 - 1 bytes, over any IPU's memory as the real figure is (the driver raised
    OverflowError, a traceback, after the trial had run)."""
    low, high = _INT64
    out = []
    for row in rows:
        wide = [n for n in _INT_COLUMNS if type(row.get(n)) is int and not low <= row[n] <= high]
        out.append({**row, **{n: high if row[n] > 0 else low for n in wide}} if wide else row)
    return out


class ResultsTable(Protocol):
    """The results table in one database: what `ResultsStore` asks of either implementation."""

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Insert rows; a row already there (same study and trial) is left as it is."""

    def trial_numbers(self, study_name: str) -> list[int]:
        """The trial numbers of the study's rows."""

    def rows(self, study_name: str | None) -> list[dict[str, Any]]:
        """Rows (column -> value, no row id) by study and trial; None: every study."""

    def studies(self) -> list[str]:
        """The studies with rows."""

    def close(self) -> None:
        """Release the connection(s)."""


@cache
def _sa_table() -> Table:
    """The table for SQLAlchemy (database servers), built on first use: SQLAlchemy takes
    ~0.4 s to import and a journal's results (SQLite) do not need it."""
    import sqlalchemy as sa

    def column(name: str, kind: str, not_null: bool) -> sa.Column[Any]:
        type_name, args, _ = _KINDS[kind]
        return sa.Column(name, getattr(sa, type_name)(*args), nullable=not not_null)

    return sa.Table(
        TABLE_NAME, sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        *(column(*c) for c in _COLUMNS),
        sa.UniqueConstraint(*_UNIQUE[1], name=_UNIQUE[0]),
    )


def sqlite_path(url: str) -> str | None:
    """The file of a plain `sqlite:///FILE` URL (stdlib sqlite3 serves it); None for any other
    URL (a driver, options, in-memory), which SQLAlchemy serves."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url or "%" in url or len(url) == len(prefix):
        return None
    return url[len(prefix):]


class _SqliteTable(ResultsTable):
    """The results table in a SQLite file through the standard library's sqlite3.

    Same table (DDL as SQLAlchemy's SQLite dialect writes it), same pragmas, same insert rule
    and the same Python values read back (booleans, the JSON column decoded) as `_RdbTable`.
    """

    def __init__(self, path: str) -> None:
        # One connection per store, used under a lock (the heartbeat is another thread).
        self._conn = sqlite3.connect(path, timeout=60, check_same_thread=False,
                                     isolation_level=None)
        self._lock = threading.Lock()
        try:  # closed on any error: a damaged file is moved aside after, never while open
            # WAL lets readers and one writer proceed together; busy timeout waits out others.
            self._conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL survives a killed process (only power loss may drop the last
            # commits, and those rows are rebuilt from the study by `sync`).
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=60000")
            self._create()
        except BaseException:
            self._conn.close()
            raise

    def _create(self) -> None:
        cols = ",\n\t".join(
            f'"{n}" {_KINDS[k][2]}' + (" NOT NULL" if nn else "") for n, k, nn in _COLUMNS)
        name, unique = _UNIQUE
        with self._lock:
            # IF NOT EXISTS: workers starting together do not race on CREATE TABLE.
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE_NAME} (\n\tid INTEGER NOT NULL,\n\t{cols},"
                f"\n\tPRIMARY KEY (id),\n\tCONSTRAINT {name} UNIQUE ({', '.join(unique)})\n)")
            why = sqlite_problem(self._conn, TABLE_NAME, COLUMN_NAMES)
            if why is not None:  # before a column is added to another's table
                raise ForeignTable(why, sqlite_own(self._conn))
            # The columns added stand only if a row is then taken: another's table stays as
            # it was. IMMEDIATE: a reader's snapshot cannot wait to become a writer (SQLite
            # says "database is locked" at once), a write lock taken first waits its turn.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._add_columns()
                sql, values = self._insert_sql([PROBE_ROW])
                self._conn.execute("SAVEPOINT ipu_tune_probe")
                why = probe(lambda: self._conn.executemany(sql, values), lambda: self._conn.execute(
                    "ROLLBACK TO ipu_tune_probe").execute("RELEASE ipu_tune_probe"))
                if why is not None:
                    raise ForeignTable(why, sqlite_own(self._conn))
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a disk error may have ended it
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _add_columns(self) -> None:
        """Add the columns of knobs declared after the table was made (nullable)."""
        have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({TABLE_NAME})")}
        for n, k, _ in _COLUMNS:
            if n not in have:
                try:
                    self._conn.execute(f'ALTER TABLE {TABLE_NAME} ADD COLUMN "{n}" {_KINDS[k][2]}')
                except sqlite3.OperationalError as exc:  # a racing worker added it first
                    if "duplicate column" not in str(exc):
                        raise

    @staticmethod
    def _insert_sql(rows: list[dict[str, Any]]) -> tuple[str, list[tuple[Any, ...]]]:
        names = [n for n, _, _ in _COLUMNS]
        quoted = ", ".join(f'"{n}"' for n in names)
        marks = ", ".join("?" * len(names))
        values = [tuple(json.dumps(r.get(n)) if k == "json" else r.get(n)
                        for n, k, _ in _COLUMNS) for r in rows]
        return (f"INSERT INTO {TABLE_NAME} ({quoted}) VALUES ({marks}) "
                f"ON CONFLICT ({', '.join(_UNIQUE[1])}) DO NOTHING", values)

    def insert(self, rows: list[dict[str, Any]]) -> None:
        sql, values = self._insert_sql(rows)
        with self._lock, self._conn:
            self._conn.execute("BEGIN")
            self._conn.executemany(sql, values)

    def trial_numbers(self, study_name: str) -> list[int]:
        with self._lock:
            cur = self._conn.execute(
                f"SELECT trial_number FROM {TABLE_NAME} WHERE study = ?", (study_name,))
            return [r[0] for r in cur.fetchall()]

    def rows(self, study_name: str | None) -> list[dict[str, Any]]:
        where, args = ("WHERE study = ?", (study_name,)) if study_name is not None else ("", ())
        kinds = dict((n, k) for n, k, _ in _COLUMNS)
        with self._lock:
            cur = self._conn.execute(
                f"SELECT * FROM {TABLE_NAME} {where} ORDER BY study, trial_number", args)
            names = [d[0] for d in cur.description]
            raw = cur.fetchall()
        return [{n: _read(kinds.get(n), v) for n, v in zip(names, r, strict=True) if n != "id"}
                for r in raw]

    def studies(self) -> list[str]:
        with self._lock:
            cur = self._conn.execute(f"SELECT DISTINCT study FROM {TABLE_NAME}")
            return [r[0] for r in cur.fetchall()]

    def close(self) -> None:
        self._conn.close()


_NUMERIC = ("int", "bigint", "float", "bool")  # SQLite keeps any value in any column


def _read(kind: str | None, value: Any) -> Any:
    """A stored value as SQLAlchemy gives it back; text where a number belongs reads as None."""
    if value is None or (kind in _NUMERIC and type(value) not in (int, float)):
        return None
    if kind == "json":
        try:
            return json.loads(value)
        except (TypeError, ValueError):  # not JSON (written by something else): unknown
            return None
    return bool(value) if kind == "bool" else value


class _RdbTable(ResultsTable):
    """The results table in a database server (or any SQLAlchemy URL) through SQLAlchemy."""

    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine, event
        from sqlalchemy.engine import make_url

        self._backend = make_url(url).get_backend_name()
        if self._backend == "sqlite":
            self._engine: Engine = create_engine(url, connect_args={"timeout": 60})

            @event.listens_for(self._engine, "connect")
            def _on_connect(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()  # the pragmas of `_SqliteTable`, same reasons
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute("PRAGMA busy_timeout=60000")
                cur.close()
        else:
            self._engine = create_engine(url, pool_pre_ping=True)
        try:
            self._create_table()
        except BaseException:
            self._engine.dispose()
            raise

    def _create_table(self, attempts: int = 5) -> None:
        from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

        # Workers starting together race on CREATE TABLE; the loser sees "already exists"
        # and finds the table on its next check.
        for attempt in range(attempts):
            try:
                _sa_table().metadata.create_all(self._engine, checkfirst=True)
                why = sa_problem(self._engine, TABLE_NAME, COLUMN_NAMES) or self._complete()
                if why is not None:  # never dropped or moved: the caller says what is wrong
                    raise ForeignTable(why, sa_own(self._engine))
                return
            except (OperationalError, ProgrammingError, IntegrityError):
                if attempt == attempts - 1:
                    raise

    def _add_missing_columns(self, conn: Any) -> None:
        """Add the columns of knobs declared after the table was made (nullable, so old rows
        read as unknown); a racing worker's ALTER makes ours fail, and the retry finds it."""
        from sqlalchemy import inspect, text

        have = {c["name"] for c in inspect(conn).get_columns(TABLE_NAME)}
        for column in _sa_table().columns:
            if column.name not in have:
                kind = column.type.compile(dialect=self._engine.dialect)
                conn.execute(text(f'ALTER TABLE {TABLE_NAME} ADD COLUMN "{column.name}" {kind}'))

    def _complete(self) -> str | None:
        """Add the missing columns, then insert a row and roll it back (`probe`): what is wrong
        with the table, the columns then not added; None when it takes the row."""
        with self._engine.connect() as conn:
            outer = conn.begin()
            try:
                self._add_missing_columns(conn)
                inner = conn.begin_nested()
                why = probe(lambda: conn.execute(self._insert_stmt([PROBE_ROW])), inner.rollback)
            except BaseException:
                outer.rollback()
                raise
            if why is None:
                outer.commit()
            else:
                outer.rollback()
            return why

    def _insert_stmt(self, rows: list[dict[str, Any]]) -> Any:
        if self._backend == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
        return insert(_sa_table()).values(rows).on_conflict_do_nothing(
            index_elements=list(_UNIQUE[1]))

    def insert(self, rows: list[dict[str, Any]]) -> None:
        with self._engine.begin() as conn:
            conn.execute(self._insert_stmt(rows))

    def trial_numbers(self, study_name: str) -> list[int]:
        from sqlalchemy import select

        table = _sa_table()
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(table.c.trial_number).where(table.c.study == study_name)).all()
        return [r[0] for r in rows]

    def rows(self, study_name: str | None) -> list[dict[str, Any]]:
        from sqlalchemy import select

        table = _sa_table()
        query = select(table)
        if study_name is not None:
            query = query.where(table.c.study == study_name)
        with self._engine.connect() as conn:
            found = conn.execute(query.order_by(table.c.study, table.c.trial_number)).mappings()
            return [{k: v for k, v in r.items() if k != "id"} for r in found]

    def studies(self) -> list[str]:
        from sqlalchemy import select

        table = _sa_table()
        with self._engine.connect() as conn:
            return [r[0] for r in conn.execute(select(table.c.study).distinct()).all()]

    def close(self) -> None:
        self._engine.dispose()


def open_table(url: str) -> ResultsTable:
    """A plain `sqlite:///FILE` through the standard library's sqlite3, any other URL through
    SQLAlchemy (so a journal run does not import SQLAlchemy, ~0.4 s)."""
    path = sqlite_path(url)
    return _SqliteTable(path) if path is not None else _RdbTable(url)
