"""A results table that is not ipu-tune's: found when the table is opened, before any row.

The table is a copy of the studies, so a database whose `ipu_tune_results` is another table
(other columns, no unique (study, trial_number) for inserts to skip rows already there, a
trigger, a view of that name, a constraint its rows break) must not end a run with a driver's
traceback. Its shape is checked, then a row is inserted and rolled back (what a constraint or
trigger does to a real row, it does to this one). The caller moves a file of ipu-tune's own
aside (`ResultsStore`) or says in one line what is wrong; a database server's table is never
dropped or moved.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "PROBE_ROW", "ForeignTable", "probe", "sa_own", "sa_problem", "shape_problem", "sqlite_own",
    "sqlite_problem",
]

# A database holding these is a study storage (Optuna's schema), never ipu-tune's to move.
OPTUNA_TABLES = frozenset({"studies", "trials", "alembic_version"})
_KEY = ("study", "trial_number")
_NEEDED = ("id", "study", "trial_number", "state")
# The row inserted and rolled back: the columns every row fills, the rest NULL.
PROBE_ROW: dict[str, Any] = {"study": "ipu-tune probe", "trial_number": -1, "state": "COMPLETE"}
# A driver's words for a fault of the machine or a wait, not of the table.
_FAULTS = ("disk", "full", "readonly", "read-only", "locked", "busy", "unable to open", "I/O",
           "connection", "server closed", "terminat", "timeout")


class ForeignTable(Exception):
    """`ipu_tune_results` is not ipu-tune's table: `why`, and whether its database is a file
    of ipu-tune's own (`own`: results.db or results@<tag>.db holding no study)."""

    def __init__(self, why: str, own: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.own = own


def shape_problem(kind: str | None, columns: Sequence[tuple[str, bool, bool]],
                  unique: Sequence[Sequence[str]], triggers: Sequence[str]) -> str | None:
    """What is wrong with a table of type `kind` ('table', 'view'; None: no such object),
    `columns` (name, required: NOT NULL without a default and not the key, ours), its unique
    column sets and its triggers; None when nothing is."""
    if kind is None:
        return None
    if kind != "table":
        return f"it is a {kind}"
    if triggers:
        return f"it has a trigger ({', '.join(sorted(triggers))})"
    names = {name for name, _, _ in columns}
    missing = [c for c in _NEEDED if c not in names]
    if missing:
        return f"it has no column {', '.join(missing)}"
    required = [name for name, needed, ours in columns if needed and not ours]
    if required:
        return f"its column(s) {', '.join(required)} must be given and ipu-tune has no such column"
    if not any(tuple(u) == _KEY for u in unique):
        return "it has no unique (study, trial_number), which inserts rely on"
    return None


def probe(insert: Callable[[], object], rollback: Callable[[], object]) -> str | None:
    """What inserting a row does (`insert`, then `rollback` whatever happens): None when it is
    taken, else the error's first line. A fault of the machine (a full disk, a lost server) is
    raised: the table is not to blame."""
    try:
        try:
            insert()
        finally:
            rollback()
    except (sqlite3.Error, _sa_errors()) as exc:
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        first = detail[0] if detail else type(exc).__name__
        if any(word.lower() in first.lower() for word in _FAULTS):
            raise
        return f"a row is refused: {first}"
    return None


def _sa_errors() -> type[Exception]:
    """SQLAlchemy's base error when it is loaded (a journal's table never loads it)."""
    import sys

    exc = getattr(sys.modules.get("sqlalchemy.exc"), "StatementError", None)
    return exc if isinstance(exc, type) else sqlite3.Error


def sqlite_problem(conn: sqlite3.Connection, table: str, ours: Sequence[str]) -> str | None:
    """`shape_problem` of `table` in a SQLite database (`ours`: ipu-tune's column names)."""
    found = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if found is None:
        return None
    triggers = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (table,))]
    # cid, name, type, notnull, default, pk
    columns = [(r[1], bool(r[3]) and r[4] is None and not r[5], r[1] in ours)
               for r in conn.execute(f'PRAGMA table_info("{table}")')]
    unique = []
    for index in conn.execute(f'PRAGMA index_list("{table}")').fetchall():
        if index[2]:  # seq, name, unique, origin, partial
            unique.append([r[2] for r in conn.execute(f'PRAGMA index_info("{index[1]}")')])
    return shape_problem(found[0], columns, unique, triggers)


def sqlite_own(conn: sqlite3.Connection) -> bool:
    """Whether the database holds no study (no table of Optuna's schema)."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return not names & OPTUNA_TABLES


def sa_problem(engine: Any, table: str, ours: Sequence[str]) -> str | None:
    """`shape_problem` of `table` through SQLAlchemy (a database server)."""
    from sqlalchemy import inspect, text

    insp = inspect(engine)
    if table in insp.get_view_names():
        return shape_problem("view", [], [], [])
    if not insp.has_table(table):
        return None
    columns = [(c["name"], not c["nullable"] and c.get("default") is None and c["name"] != "id",
                c["name"] in ours) for c in insp.get_columns(table)]
    unique = [u["column_names"] for u in insp.get_unique_constraints(table)]
    unique += [i["column_names"] for i in insp.get_indexes(table) if i.get("unique")]
    pk = insp.get_pk_constraint(table).get("constrained_columns") or []
    unique.append(pk)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            query = ("SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(:t) "
                     "AND NOT tgisinternal")
        else:
            query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"
        triggers = [r[0] for r in conn.execute(text(query), {"t": table})]
    return shape_problem("table", columns, unique, triggers)


def sa_own(engine: Any) -> bool:
    """Whether a SQLite database reached through SQLAlchemy holds no study."""
    from sqlalchemy import inspect

    return engine.dialect.name == "sqlite" and not (
        set(inspect(engine).get_table_names()) & OPTUNA_TABLES)
