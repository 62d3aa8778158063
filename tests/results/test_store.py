from __future__ import annotations

import json
from pathlib import Path

import optuna
import pandas as pd
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.results import PLAN_COLUMNS, ResultsStore, export_table


def _study_with_attrs(n: int) -> optuna.Study:
    study = optuna.create_study(study_name="s", direction="maximize")
    for i in range(n):
        t = study.ask()
        x = t.suggest_int("ga", 1, 64)
        t.set_user_attr("config", {
            "model": {"name": "resnet101"},
            "workload": {"mode": "train", "micro_batch_size": 64, "optimizer": "adamw"},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"precision": "16.16", "gradient_accumulation": x,
                     "pipeline": {"splits": ["layer3.8"], "schedule": "grouped"}},
        })
        t.set_user_attr("result", {"fits": True, "throughput": 100.0 * i,
                                   "memory_per_ipu": [10, 20 + i], "memory_limit_bytes": 900,
                                   "bottleneck": "compute", "reason": ""})
        t.set_user_attr("constraints", [-1.0])
        study.tell(t, 100.0 * i)
    return study


def test_sync_inserts_one_row_per_finished_trial_once(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    study = _study_with_attrs(5)
    assert store.sync(study) == 5
    assert store.sync(study) == 0  # idempotent: no duplicate rows
    store.append("s", study.trials[0])  # a repeated append is ignored too
    df = store.frame("s")
    assert list(df["trial_number"]) == [0, 1, 2, 3, 4]
    assert df["gradient_accumulation"].tolist() == [t.params["ga"] for t in study.trials]
    assert json.loads(df["pipeline_splits"][0]) == ["layer3.8"]
    assert df["peak_memory_bytes"].tolist() == [20, 21, 22, 23, 24]
    assert df["state"].unique().tolist() == ["COMPLETE"]
    for name, _ in PLAN_COLUMNS:
        assert name in df.columns


def test_running_trials_get_no_row(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    study = _study_with_attrs(2)
    study.ask()  # left RUNNING
    store.sync(study)
    assert len(store.frame("s")) == 2


def test_export_parquet_and_csv(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    store.sync(_study_with_attrs(3))
    df = store.frame("s")
    pq = export_table(df, tmp_path / "t.parquet")
    csv = export_table(df, tmp_path / "t.csv")
    assert pd.read_parquet(pq)["trial_number"].tolist() == [0, 1, 2]
    assert pd.read_csv(csv)["throughput"].tolist() == [0.0, 100.0, 200.0]
    with pytest.raises(IpuTuneError):
        export_table(df, tmp_path / "t.xlsx")


def test_store_on_postgres(pg_url: str) -> None:
    store = ResultsStore(pg_url)
    study = _study_with_attrs(4)
    big = study.ask()
    big.set_user_attr("result", {"memory_per_ipu": [3_000_000_000], "fits": False,
                                 "memory_limit_bytes": 940_572_672})
    big.set_user_attr("constraints", [2.19])
    # An infeasible plan (PRUNED, as the tuner tells it): peak bytes beyond a 32-bit integer.
    study.tell(big, state=optuna.trial.TrialState.PRUNED)
    assert store.sync(study) == 5
    assert store.sync(study) == 0
    frame = store.frame("s")
    assert len(frame) == 5
    assert frame["peak_memory_bytes"].max() == 3_000_000_000
    row = frame[frame["trial_number"] == big.number].iloc[0]
    assert row["state"] == "PRUNED"
    assert row["feasible"] == False  # noqa: E712 (a numpy bool)
    assert pd.isna(row["values"]) and pd.isna(row["throughput"])
    store.close()
