"""One contract for every results table: the standard library's SQLite, SQLAlchemy's SQLite and
PostgreSQL (through SQLAlchemy). Each is a `ResultsTable` by declaration, and each stores and
reads back the same rows, ignores a row it already has and lists its studies."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipu_tune.storage import COLUMN_NAMES, PLAN_COLUMNS, ResultsTable, open_table

TABLES = ("sqlite3", "sqlalchemy-sqlite", "postgresql")


@pytest.fixture(params=TABLES)
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ResultsTable]:
    if request.param == "sqlite3":
        url = f"sqlite:///{tmp_path / 'r.db'}"
    elif request.param == "sqlalchemy-sqlite":
        url = f"sqlite+pysqlite:///{tmp_path / 'r.db'}"  # a driver in the URL: SQLAlchemy
    else:
        url = request.getfixturevalue("pg_url")
    opened = open_table(url)
    yield opened
    opened.close()


def _row(study: str, number: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    row.update(study=study, trial_number=number, state="COMPLETE", values=json.dumps([1.5]),
               throughput=1.5 * number, fits=True, feasible=True,
               peak_memory_bytes=3_000_000_000 + number, memory_per_ipu=json.dumps([10, 20]),
               bottleneck="compute", model="resnet101", ipu="mk2", num_ipus=2,
               started_at="2026-01-02T03:04:05.000006", extra={"constraints": [-0.5]})
    for name, kind in PLAN_COLUMNS:
        row[name] = {"int": 4, "float": 0.5, "bool": False}.get(kind, "x")
    return row


def test_every_table_declares_the_results_table_protocol(table: ResultsTable) -> None:
    assert ResultsTable in type(table).__mro__


def test_rows_read_back_as_written_and_a_repeated_row_is_ignored(table: ResultsTable) -> None:
    study = f"s-{uuid.uuid4().hex[:8]}"  # the PostgreSQL server is shared by the session
    rows = [_row(study, n) for n in (2, 0, 1)]
    table.insert(rows)
    table.insert([{**rows[0], "throughput": -1.0}])  # same study and trial: left as it was
    assert sorted(table.trial_numbers(study)) == [0, 1, 2]
    back = table.rows(study)
    assert [r["trial_number"] for r in back] == [0, 1, 2]  # by study, then trial
    assert back == sorted(rows, key=lambda r: r["trial_number"])
    assert isinstance(back[0]["fits"], bool) and back[0]["extra"] == {"constraints": [-0.5]}


def test_every_table_lists_its_studies_and_reads_them_all(table: ResultsTable) -> None:
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    table.insert([_row(a, 0), _row(b, 0), _row(b, 1)])
    assert {a, b} <= set(table.studies())
    everything = [r for r in table.rows(None) if r["study"] in (a, b)]
    assert [(r["study"], r["trial_number"]) for r in everything] == [(a, 0), (b, 0), (b, 1)]
