from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import optuna
import pandas as pd
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.records import TrialRecord
from ipu_tune.results import append_trials, row_from_trial, sync_results
from ipu_tune.storage import PLAN_COLUMNS, ResultsStore, export_table


def _study_with_attrs(n: int) -> optuna.Study:
    study = optuna.create_study(study_name="s", direction="maximize")
    for i in range(n):
        t = study.ask()
        x = t.suggest_int("ga", 1, 64)
        TrialRecord.write_plan(t, {
            "model": {"name": "resnet101"},
            "workload": {"mode": "train", "micro_batch_size": 64, "optimizer": "adamw"},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"precision": "16.16", "gradient_accumulation": x,
                     "pipeline": {"splits": ["layer3.8"], "schedule": "grouped"}},
        }, {"fits": True, "throughput": 100.0 * i, "memory_per_ipu": [10, 20 + i],
            "memory_limit_bytes": 900, "bottleneck": "compute", "reason": ""})
        t.set_user_attr("constraints", [-1.0])
        study.tell(t, 100.0 * i)
    return study


def test_sync_inserts_one_row_per_finished_trial_once(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    study = _study_with_attrs(5)
    assert sync_results(store, study) == 5
    assert sync_results(store, study) == 0  # idempotent: no duplicate rows
    append_trials(store, "s", study.trials[:1])  # a repeated append is ignored too
    df = store.frame("s")
    assert list(df["trial_number"]) == [0, 1, 2, 3, 4]
    assert df["gradient_accumulation"].tolist() == [t.params["ga"] for t in study.trials]
    assert json.loads(df["pipeline_splits"][0]) == ["layer3.8"]
    assert df["peak_memory_bytes"].tolist() == [20, 21, 22, 23, 24]
    assert df["state"].unique().tolist() == ["COMPLETE"]
    for name, _ in PLAN_COLUMNS:
        assert name in df.columns


def test_a_results_file_that_is_no_database_is_set_aside_and_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table is a copy of the studies: a corrupt copy (overwritten, its header lost) is
    moved aside with one line and refilled from the study, not a refusal of every command
    (before: `results store ...: cannot open (file is not a database)`, exit 2)."""
    db = tmp_path / "results.db"
    db.write_bytes(b"not a database, not a SQLite header" * 50)
    store = ResultsStore(f"sqlite:///{db}")
    try:
        assert sync_results(store, _study_with_attrs(3)) == 3
        assert list(store.frame("s")["trial_number"]) == [0, 1, 2]
    finally:
        store.close()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("results.db.bad-")]
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"not a database")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"moved it to {str(aside[0])!r}" in err, err


def test_running_trials_get_no_row(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    study = _study_with_attrs(2)
    study.ask()  # left RUNNING
    sync_results(store, study)
    assert len(store.frame("s")) == 2


def test_export_parquet_and_csv(tmp_path: Path) -> None:
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    sync_results(store, _study_with_attrs(3))
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
    TrialRecord.write_plan(big, {}, {"memory_per_ipu": [3_000_000_000], "fits": False,
                                     "memory_limit_bytes": 940_572_672})
    big.set_user_attr("constraints", [2.19])
    # An infeasible plan (PRUNED, as the tuner tells it): peak bytes beyond a 32-bit integer.
    study.tell(big, state=optuna.trial.TrialState.PRUNED)
    assert sync_results(store, study) == 5
    assert sync_results(store, study) == 0
    frame = store.frame("s")
    assert len(frame) == 5
    assert frame["peak_memory_bytes"].max() == 3_000_000_000
    row = frame[frame["trial_number"] == big.number].iloc[0]
    assert row["state"] == "PRUNED"
    assert row["feasible"] == False  # noqa: E712 (a numpy bool)
    assert pd.isna(row["values"]) and pd.isna(row["throughput"])
    store.close()


def test_sqlite_without_sqlalchemy_is_the_same_table(tmp_path: Path) -> None:
    """A journal's results.db goes through the standard library's sqlite3 (no SQLAlchemy
    import): same columns, types, keys and unique rule as SQLAlchemy's SQLite table,
    and the same values read back by either."""
    import sqlite3

    from ipu_tune.storage._results_table import _RdbTable

    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    study = _study_with_attrs(4)
    store = ResultsStore(f"sqlite:///{ours}")
    assert sync_results(store, study) == 4
    rdb = _RdbTable(f"sqlite:///{theirs}")
    rdb.insert([row_from_trial("s", t) for t in study.trials])

    def schema(path: Path) -> tuple[object, ...]:
        with sqlite3.connect(path) as conn:
            info = conn.execute("PRAGMA table_info(ipu_tune_results)").fetchall()
            index = [conn.execute(f"PRAGMA index_info({i[1]})").fetchall()
                     for i in conn.execute("PRAGMA index_list(ipu_tune_results)").fetchall()]
        return info, index

    assert schema(ours) == schema(theirs)
    assert store.rows("s") == rdb.rows("s")
    assert _RdbTable(f"sqlite:///{ours}").rows("s") == rdb.rows("s")  # each reads the other's
    assert isinstance(store.rows("s")[0]["fits"], bool)
    assert store.rows("s")[0]["extra"] == {"constraints": [-1.0]}
    rdb.close()
    store.close()


def test_a_row_from_the_plan_as_written_equals_the_row_read_back_from_the_study() -> None:
    # The tuner builds each row from the plan `write_plan` returned instead of parsing the
    # stored text again: the rows must not differ, for plans that fit, do not fit, or could
    # not be simulated (non-finite figures stored as null).
    from ipu_tune.config import to_plain_dict
    from ipu_tune.records import result_payload
    from ipu_tune.search import tell_outcome
    from tests.search._helpers import compose_cfg, make_problem

    problem = make_problem(compose_cfg("model=resnet101", "sampler=random", "sampler.seed=3"))
    study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
    kinds: set[str] = set()
    for i in range(40):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        if i % 10 == 0:  # 8 replicas on 2 IPUs: a plan the simulator refuses
            cfg = outcome.config
            outcome = problem.evaluate(replace(cfg, plan=replace(cfg.plan, replication_factor=8)))
        plan = TrialRecord.write_plan(trial, to_plain_dict(outcome.config),
                                      result_payload(outcome.result, whole=outcome.feasible))
        frozen = tell_outcome(study, trial, outcome)
        kinds.add("fits" if outcome.feasible else
                  "invalid" if outcome.result.bottleneck == "invalid plan" else "too big")
        assert row_from_trial("s", frozen, plan) == row_from_trial("s", frozen)
    assert kinds == {"fits", "invalid", "too big"}


def test_a_full_disk_under_the_results_table_names_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite says "database or disk is full" without a path: the line names the table's file
    as a path, not as the URL ipu-tune opened it by."""
    import sqlite3

    store = ResultsStore(f"sqlite:///{tmp_path}/results.db")

    def full(rows: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store._table, "insert", full)
    with pytest.raises(IpuTuneError) as err:
        store.insert([{"study_name": "s", "trial_number": 0}])
    assert str(err.value).startswith(
        f"disk error writing {str(tmp_path / 'results.db')!r}: database or disk is full")
    assert err.value.fault
    store.close()
