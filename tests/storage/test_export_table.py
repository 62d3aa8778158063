"""Parquet and CSV exports of the results table keep their types: lists, timestamps."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import optuna
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ipu_tune.records import TrialRecord
from ipu_tune.results import sync_results
from ipu_tune.storage import ResultsStore, csv_text, export_table


def _store(tmp_path: Path) -> ResultsStore:
    study = optuna.create_study(study_name="s", direction="maximize")
    for i in range(3):
        trial = study.ask()
        TrialRecord.write_plan(trial, {
            "model": {"name": "resnet101"},
            "workload": {"mode": "train", "micro_batch_size": 64, "optimizer": "adamw"},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"precision": "16.16", "gradient_accumulation": i + 1,
                     "pipeline": {"splits": ["layer3.8"] * i, "schedule": "grouped"}},
        }, {"fits": True, "throughput": 10.0 * i, "memory_per_ipu": [10, 20 + i]})  # fmt: skip
        trial.set_user_attr("constraints", [-0.5])  # feasible: its values are kept
        study.tell(trial, 10.0 * i)
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    sync_results(store, study)
    return store


def test_parquet_keeps_lists_as_lists_and_times_as_timestamps(tmp_path: Path) -> None:
    frame = _store(tmp_path).frame("s")
    schema = pq.read_schema(export_table(frame, tmp_path / "t.parquet"))
    assert pa.types.is_list(schema.field("pipeline_splits").type)
    assert pa.types.is_list(schema.field("memory_per_ipu").type)
    assert pa.types.is_integer(schema.field("memory_per_ipu").type.value_type)
    assert pa.types.is_list(schema.field("values").type)
    for name in ("started_at", "finished_at"):
        assert pa.types.is_timestamp(schema.field(name).type)
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert [list(v) for v in back["pipeline_splits"]] == [[], ["layer3.8"], ["layer3.8"] * 2]
    assert [list(v) for v in back["memory_per_ipu"]] == [[10, 20], [10, 21], [10, 22]]
    started = pd.to_datetime(frame["started_at"])
    assert (back["started_at"] == started).all()


def test_csv_writes_lists_as_json_and_times_in_iso_8601(tmp_path: Path) -> None:
    frame = _store(tmp_path).frame("s")
    back = pd.read_csv(export_table(frame, tmp_path / "t.csv"))
    assert [json.loads(v) for v in back["pipeline_splits"]] == [[], ["layer3.8"], ["layer3.8"] * 2]
    assert [json.loads(v) for v in back["values"]] == [[0.0], [10.0], [20.0]]
    parsed = pd.to_datetime(back["finished_at"], format="ISO8601")
    assert (parsed == pd.to_datetime(frame["finished_at"])).all()


def test_csv_cells_a_spreadsheet_would_evaluate_are_plain_text(tmp_path: Path) -> None:
    # A shared study controls the text of its trials' results (bottleneck, reason).
    formulas = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1)",
                "\t=1", "\r=1"]
    study = optuna.create_study(study_name="s", direction="maximize")
    for i, text in enumerate(formulas):
        trial = study.ask()
        TrialRecord.write_plan(trial, {
            "model": {"name": "resnet101"},
            "workload": {"mode": "train", "micro_batch_size": 64, "optimizer": "adamw"},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"precision": "16.16", "gradient_accumulation": i + 1},
        }, {"fits": True, "throughput": -1.0 - i, "memory_per_ipu": [10], "bottleneck": text,
            "reason": text})  # fmt: skip
        trial.set_user_attr("constraints", [-0.5])
        study.tell(trial, -1.0 - i)
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    sync_results(store, study)
    frame = store.frame("s")
    back = pd.read_csv(export_table(frame, tmp_path / "t.csv"), keep_default_na=False)
    assert list(back["bottleneck"]) == ["'" + t for t in formulas]
    assert list(back["reason"]) == ["'" + t for t in formulas]
    assert list(back["throughput"]) == [-1.0 - i for i in range(len(formulas))]  # numbers stay
    assert list(back["study"]) == ["s"] * len(formulas)
    # `trials --csv` writes through the same function: one row per trial, a CR forges none.
    rows = list(csv.reader(io.StringIO(csv_text(frame), newline="")))
    assert len(rows) == 1 + len(formulas)
    column = rows[0].index("bottleneck")
    assert [r[column] for r in rows[1:]] == ["'" + t for t in formulas]


def test_each_objective_has_a_column_named_by_its_metric(tmp_path: Path) -> None:
    study = optuna.create_study(study_name="s", directions=["minimize", "minimize"])
    study.set_metric_names(["latency per call [s]", "=peak memory per IPU [bytes]"])
    trial = study.ask()
    TrialRecord.write_plan(trial, {
        "model": {"name": "resnet50"},
        "workload": {"mode": "infer", "micro_batch_size": 1},
        "system": {"ipu": "mk2", "num_ipus": 1},
        "plan": {"precision": "16.16", "device_iterations": 1},
    }, {"fits": True, "throughput": 2400.0, "latency_s": 4.2e-4,
        "memory_per_ipu": [10]})  # fmt: skip
    trial.set_user_attr("constraints", [-0.5])
    study.tell(trial, [4.2e-4, 10.0])
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    sync_results(store, study)
    frame = store.frame("s")
    back = pd.read_parquet(export_table(frame, tmp_path / "t.parquet", study.metric_names))
    assert back["latency per call [s]"].tolist() == [4.2e-4]
    assert back["latency_s"].tolist() == [4.2e-4]  # the plan's, whatever the objectives
    text = (export_table(frame, tmp_path / "t.csv", study.metric_names)).read_text()
    header = next(csv.reader(io.StringIO(text)))
    assert "latency per call [s]" in header
    assert "'=peak memory per IPU [bytes]" in header  # a header is a cell a sheet evaluates
