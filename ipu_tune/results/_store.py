"""The results store: one append-only row per finished trial, in an SQL table.

A finished trial is COMPLETE (a feasible plan, with its objective values) or PRUNED (an
infeasible one: `ipu_tune.search.tell_outcome`). An infeasible trial's row has no objective
values (``values`` NULL), no throughput when the plan does not fit in memory (the simulator's
0.0 means "does not run", not a measured rate), ``feasible`` false and the ``reason``; its
memory per IPU, limit, plan and constraints (in ``extra``) are kept.

The row is derived from what the trial itself carries in the study (user attributes written
before `tell`), so the table can always be brought back in line with the study: a process
killed between `tell` and the insert leaves a finished trial without a row, and the next
`sync` of any worker inserts it. Inserts ignore rows already there (unique study + trial).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import optuna
import pandas as pd
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS
from ipu_tune.records import TrialRecord
from ipu_tune.storage import redact

__all__ = ["PLAN_COLUMNS", "TABLE_NAME", "ResultsStore", "row_from_trial"]

TABLE_NAME = "ipu_tune_results"

_SQL_TYPES: dict[str, Any] = {
    "str8": String(8),
    "str16": String(16),
    "int": Integer,
    "float": Float,
    "bool": Boolean,
    "json": String(2000),  # a JSON list (pipeline splits)
}

# Plan knob columns, in the order of `ipu_tune.knobs`.
PLAN_COLUMNS: tuple[tuple[str, Any], ...] = tuple((k.column, _SQL_TYPES[k.sql]) for k in KNOBS)

_metadata = MetaData()
_table = Table(
    TABLE_NAME,
    _metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study", String(512), nullable=False),
    Column("trial_number", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("values", String(1000)),
    Column("throughput", Float),
    Column("fits", Boolean),
    Column("feasible", Boolean),  # every constraint <= 0 (memory, global batch, floor)
    Column("peak_memory_bytes", BigInteger),  # bytes exceed 2**31 on infeasible plans
    Column("memory_per_ipu", String(2000)),
    Column("memory_limit_bytes", BigInteger),
    Column("bottleneck", String(64)),
    Column("reason", String(1000)),
    *[Column(name, type_) for name, type_ in PLAN_COLUMNS],
    Column("model", String(256)),
    Column("ipu", String(16)),
    Column("num_ipus", Integer),
    Column("simulator_version", String(32)),
    Column("started_at", String(40)),
    Column("finished_at", String(40)),
    Column("extra", JSON),
    UniqueConstraint("study", "trial_number", name="uq_ipu_tune_results_trial"),
)


def row_from_trial(study_name: str, trial: FrozenTrial) -> dict[str, Any]:
    """The results row of a finished trial, from the attributes the tuner stored on it."""
    record = TrialRecord.of(trial)
    result, config = record.result, record.config
    system = config.get("system", {})
    model = config.get("model", {})
    memory = list(result.get("memory_per_ipu", []))
    row: dict[str, Any] = {
        "study": study_name,
        "trial_number": trial.number,
        "state": trial.state.name,
        # No objective values for an infeasible trial, whatever its state (older studies and
        # the samplers that need it tell them COMPLETE: `ipu_tune.search.tell_outcome`).
        "values": (json.dumps(trial.values) if trial.values is not None and record.feasible
                   else None),
        # A plan that does not fit has no throughput (not 0 samples/s).
        "throughput": result.get("throughput") if result.get("fits") else None,
        "fits": result.get("fits"),
        "feasible": record.feasible,
        "peak_memory_bytes": max(memory) if memory else None,
        "memory_per_ipu": json.dumps(memory),
        "memory_limit_bytes": result.get("memory_limit_bytes"),
        "bottleneck": result.get("bottleneck"),
        "reason": record.reason or result.get("reason"),
        "model": model.get("name") or model.get("_target_"),
        "ipu": system.get("ipu"),
        "num_ipus": system.get("num_ipus"),
        "simulator_version": result.get("simulator_version"),
        "started_at": trial.datetime_start.isoformat() if trial.datetime_start else None,
        "finished_at": trial.datetime_complete.isoformat() if trial.datetime_complete else None,
        "extra": {"constraints": record.constraints},
    }
    for k in KNOBS:
        value = _lookup(config, k.key)
        row[k.column] = json.dumps(list(value or [])) if k.sql == "json" else value
    return row


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # WAL lets readers and one writer proceed together; busy timeout waits out other writers.
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL survives a killed process (only power loss may drop the last commits,
        # and those rows are rebuilt from the study by `sync`).
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()


class ResultsStore:
    """The `ipu_tune_results` table in the study's database (or `results.db` beside a journal)."""

    def __init__(self, url: str) -> None:
        self.url = url
        backend = make_url(url).get_backend_name()
        self._backend = backend
        try:
            if backend == "sqlite":
                self._engine = create_engine(url, connect_args={"timeout": 60})
                _sqlite_pragmas(self._engine)
            else:
                self._engine = create_engine(url, pool_pre_ping=True)
            self._create_table()
        except Exception as exc:
            detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise IpuTuneError(
                f"results store {redact(url)!r}: cannot open "
                f"({detail[0] if detail else type(exc).__name__})"
            ) from None

    def _create_table(self, attempts: int = 5) -> None:
        # Workers starting together race on CREATE TABLE; the loser sees "already exists"
        # and finds the table on its next check.
        for attempt in range(attempts):
            try:
                _metadata.create_all(self._engine, checkfirst=True)
                self._add_missing_columns()
                return
            except (OperationalError, ProgrammingError, IntegrityError):
                if attempt == attempts - 1:
                    raise

    def _add_missing_columns(self) -> None:
        """Add the columns of knobs declared after the table was made (nullable, so old rows
        read as unknown); a racing worker's ALTER makes ours fail, and the retry finds it."""
        have = {c["name"] for c in inspect(self._engine).get_columns(TABLE_NAME)}
        with self._engine.begin() as conn:
            for column in _table.columns:
                if column.name not in have:
                    kind = column.type.compile(dialect=self._engine.dialect)
                    conn.execute(
                        text(f'ALTER TABLE {TABLE_NAME} ADD COLUMN "{column.name}" {kind}'))

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        ins = pg_insert if self._backend == "postgresql" else sqlite_insert
        stmt = ins(_table).values(rows).on_conflict_do_nothing(
            index_elements=["study", "trial_number"]
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def append(self, study_name: str, trial: FrozenTrial) -> None:
        self._insert([row_from_trial(study_name, trial)])

    def append_many(self, study_name: str, trials: Sequence[FrozenTrial]) -> None:
        """The rows of several finished trials in one statement (the tuner batches them)."""
        self._insert([row_from_trial(study_name, t) for t in trials])

    def sync(self, study: optuna.Study) -> int:
        """Insert the rows of finished trials that have none yet; return how many."""
        have = set(self.trial_numbers(study.study_name))
        missing = [
            row_from_trial(study.study_name, t)
            for t in study.get_trials(deepcopy=False,
                                      states=(TrialState.COMPLETE, TrialState.PRUNED))
            if t.number not in have
        ]
        self._insert(missing)
        return len(missing)

    def trial_numbers(self, study_name: str) -> list[int]:
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(_table.c.trial_number).where(_table.c.study == study_name)
            ).all()
        return [r[0] for r in rows]

    def frame(self, study_name: str | None = None) -> pd.DataFrame:
        query = select(_table)
        if study_name is not None:
            query = query.where(_table.c.study == study_name)
        with self._engine.connect() as conn:
            df = pd.read_sql(query.order_by(_table.c.study, _table.c.trial_number), conn)
        return df.drop(columns=["id"])

    def studies(self) -> Iterable[str]:
        with self._engine.connect() as conn:
            return [r[0] for r in conn.execute(select(_table.c.study).distinct()).all()]

    def close(self) -> None:
        self._engine.dispose()
