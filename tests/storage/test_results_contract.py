"""One contract for every storage the tuner supports: journal file, SQLite and PostgreSQL.

Modelled on Optuna's own storage tests (one class, parametrized over the backends): what the
tuner writes on a trial (`TrialRecord`) reads back the same from a fresh connection, a dead
worker's trial is failed through the storage's public API, and the results table gets one row
per finished trial, idempotently, with a column per declared knob.
"""

from __future__ import annotations

import json
import math
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import create_engine, inspect, text

import ipu_tune
from ipu_tune.config import EvalConfig, to_plain_dict
from ipu_tune.knobs import KNOBS
from ipu_tune.records import (
    MAX_RETRIES,
    TrialRecord,
    fail_trial,
    result_payload,
    retry_dead_trial,
)
from ipu_tune.results import append_trials, sync_results
from ipu_tune.simulator import SimResult
from ipu_tune.storage import TABLE_NAME, ResultsStore, StorageTarget, open_storage, resolve_storage

BACKENDS = ("journal", "sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StorageTarget]:
    if request.param == "journal":
        yield resolve_storage(None, str(tmp_path))
    elif request.param == "sqlite":
        yield resolve_storage(f"sqlite:///{tmp_path / 'study.db'}", str(tmp_path))
    else:
        url = request.getfixturevalue("pg_url")
        yield resolve_storage(url, str(tmp_path))


def _cfg() -> EvalConfig:
    cfg = EvalConfig()
    cfg.system.num_ipus = 2
    cfg.plan.pipeline.splits = ["layer3.8"]
    cfg.plan.recompute = "every_block"
    return cfg


class TestStoreContract:
    def _study(self, target: StorageTarget) -> tuple[optuna.Study, optuna.storages.BaseStorage]:
        storage = open_storage(target)
        name = f"contract-{uuid.uuid4().hex[:8]}"  # the PostgreSQL server is per session
        return optuna.create_study(study_name=name, storage=storage), storage

    def _reload(self, target: StorageTarget, name: str) -> optuna.Study:
        return optuna.load_study(study_name=name, storage=open_storage(target))

    def _finish(self, study: optuna.Study, cfg: EvalConfig, value: float) -> None:
        result = ipu_tune.evaluate_config(cfg)
        trial = study.ask()
        trial.suggest_int("x", 0, 10)
        TrialRecord.tag_worker(trial, "host:1:0")
        TrialRecord.write_constraints(trial, ["memory"], [-0.5])
        TrialRecord.write_outcome(trial, "", changes=2)
        TrialRecord.write_plan(trial, to_plain_dict(cfg), result_payload(result))
        study.tell(trial, value)

    def test_trial_record_reads_back_what_was_written(self, target: StorageTarget) -> None:
        study, _ = self._study(target)
        cfg = _cfg()
        self._finish(study, cfg, 1.0)
        frozen = self._reload(target, study.study_name).trials[0]
        record = TrialRecord.of(frozen)
        assert record.worker == "host:1:0"
        assert record.constraints == [-0.5] and record.feasible
        assert record.changes == 2 and not record.surplus and record.retry_of is None
        assert record.config == to_plain_dict(cfg)
        stored = record.sim_result()
        assert stored is not None
        # The exports take this result: it must be the simulated one, figure for figure.
        assert stored.to_dict() == ipu_tune.evaluate_config(cfg).to_dict()

    def test_the_plan_as_text_or_nested_dict_reads_alike(self, target: StorageTarget) -> None:
        """The plan is one JSON text (`study.tell` deep-copies a trial; a text is copied by
        reference); the same plan as a nested dict reads alike."""
        study, _ = self._study(target)
        cfg = _cfg()
        self._finish(study, cfg, 1.0)
        text = self._reload(target, study.study_name).trials[0].user_attrs["plan"]
        assert isinstance(text, str)
        plan = json.loads(text)
        trial = study.ask()
        trial.set_user_attr("plan", plan)
        study.tell(trial, 1.0)
        records = [TrialRecord.of(t) for t in self._reload(target, study.study_name).trials]
        assert records[0].config == to_plain_dict(cfg)
        assert len(records) == 2
        assert records[1].config == records[0].config
        assert records[1].result == records[0].result
        assert records[1].sim_result() == records[0].sim_result() is not None

    def test_a_non_finite_figure_is_stored_as_null(self, target: StorageTarget) -> None:
        """A plan the simulator refused has an infinite step time: the text stays standard
        JSON (no `Infinity`), the figure reads back as None and no SimResult is claimed."""
        study, _ = self._study(target)
        refused = SimResult(fits=False, throughput=0.0, step_time_s=math.inf, phases={},
                            bottleneck="invalid plan", memory=(), stages=(), reason="refused")
        trial = study.ask()
        TrialRecord.write_plan(trial, to_plain_dict(_cfg()), result_payload(refused))
        study.tell(trial, state=TrialState.PRUNED)
        frozen = self._reload(target, study.study_name).trials[0]
        text = frozen.user_attrs["plan"]
        json.loads(text, parse_constant=lambda token: pytest.fail(f"not JSON: {token}"))
        record = TrialRecord.of(frozen)
        assert record.result["step_time_s"] is None and record.result["reason"] == "refused"
        assert record.config == to_plain_dict(_cfg())
        assert record.sim_result() is None

    def test_a_trial_without_constraints_is_not_feasible(self, target: StorageTarget) -> None:
        study, _ = self._study(target)
        trial = study.ask()
        study.tell(trial, 0.0)
        record = TrialRecord.of(self._reload(target, study.study_name).trials[0])
        assert record.constraints is None and not record.feasible
        assert record.sim_result() is None

    def test_a_dead_workers_trial_fails_once_through_the_public_api(
            self, target: StorageTarget) -> None:
        study, storage = self._study(target)
        running = study.ask()
        frozen = study.trials[running.number]
        assert fail_trial(storage, study, frozen, "worker died: test")
        assert not fail_trial(storage, study, frozen, "worker died: again")  # already failed
        again = self._reload(target, study.study_name).trials[running.number]
        assert again.state == TrialState.FAIL
        assert again.system_attrs.get("fail_reason") == "worker died: test"

    def test_a_dead_workers_trial_is_retried_alike_on_every_storage(
            self, target: StorageTarget) -> None:
        """Found by PID (journal, SQLite) or by its stopped heartbeat (PostgreSQL): the dead
        trial names its worker, and the retry is a clean trial that writes its constraints
        again without Optuna's "constraint value is ignored" warning."""
        study, storage = self._study(target)
        dead = study.ask()
        dead.suggest_int("x", 0, 10)
        TrialRecord.tag_worker(dead, "otherhost:7:1")
        TrialRecord.write_constraints(dead, ["memory"], [-0.5])
        frozen = study.trials[dead.number]
        assert retry_dead_trial(storage, study, frozen, "otherhost:7:1")
        assert not retry_dead_trial(storage, study, frozen, "otherhost:7:1")  # retried once
        trials = self._reload(target, study.study_name).trials
        assert trials[dead.number].system_attrs["fail_reason"] == "worker died: otherhost:7:1"
        retry = study.ask()
        assert retry.number == len(trials) - 1
        assert retry.suggest_int("x", 0, 10) == frozen.params["x"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            TrialRecord.write_constraints(retry, ["memory"], [-0.25])
        study.tell(retry, 1.0)
        again = TrialRecord.of(self._reload(target, study.study_name).trials[retry.number])
        assert again.worker is None and again.constraints == [-0.25]

    def test_a_plan_whose_worker_dies_every_time_is_retried_at_most_max_retries(
            self, target: StorageTarget) -> None:
        """A plan that kills its worker each time (found by PID or by a stopped heartbeat) is
        not retried for ever: `MAX_RETRIES` retries, then its trial fails for good, saying so,
        and nothing is left waiting (before, every death enqueued it again)."""
        study, storage = self._study(target)
        dead = study.ask()
        plan = dead.suggest_int("x", 0, 10)
        for attempt in range(MAX_RETRIES + 1):
            frozen = study.trials[dead.number]
            assert frozen.params == {"x": plan}
            assert TrialRecord.of(frozen).retries == attempt
            assert retry_dead_trial(storage, study, frozen, f"otherhost:{attempt}:1")
            waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if attempt < MAX_RETRIES:
                assert len(waiting) == 1
                dead = study.ask()  # the retry, killed again
                assert dead.suggest_int("x", 0, 10) == plan
            else:
                assert waiting == []
        trials = self._reload(target, study.study_name).trials
        assert [t.state for t in trials] == [TrialState.FAIL] * (MAX_RETRIES + 1)
        assert [TrialRecord.of(t).retry_of for t in trials] == [None, *range(MAX_RETRIES)]
        assert trials[-1].system_attrs["fail_reason"] == (
            f"worker died: otherhost:{MAX_RETRIES}:1; not retried: its plan was retried "
            f"{MAX_RETRIES} times already (at most {MAX_RETRIES})")
        assert study.ask().number == len(trials)  # a new plan takes its place in the budget

    def test_a_worker_that_says_why_it_stopped_is_not_called_dead(
            self, target: StorageTarget) -> None:
        study, storage = self._study(target)
        trial = study.ask()
        trial.suggest_int("x", 0, 10)
        cause = "not stored: disk full"
        assert retry_dead_trial(storage, study, study.trials[0], "host:1:1", cause)
        again = self._reload(target, study.study_name).trials[0]
        assert again.system_attrs["fail_reason"] == cause

    def test_results_rows_once_per_finished_trial(self, target: StorageTarget) -> None:
        study, _ = self._study(target)
        for value in (1.0, 2.0):
            self._finish(study, _cfg(), value)
        study.ask()  # RUNNING: no row
        store = ResultsStore(target.results_url)
        try:
            assert sync_results(store, study) == 2
            assert sync_results(store, study) == 0
            append_trials(store, study.study_name, study.trials[:1])  # ignored: already there
            frame = store.frame(study.study_name)
            assert frame["trial_number"].tolist() == [0, 1]
            for k in KNOBS:
                assert k.column in frame.columns
            assert frame["recompute"].tolist() == ["every_block"] * 2
            assert frame["host_instances"].tolist() == [1, 1]
            assert study.study_name in store.studies()
        finally:
            store.close()

    def test_an_older_table_gains_the_columns_of_new_knobs(self, target: StorageTarget) -> None:
        study, _ = self._study(target)
        self._finish(study, _cfg(), 1.0)
        store = ResultsStore(target.results_url)
        store.close()
        engine = create_engine(target.results_url)
        try:
            with engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {TABLE_NAME} DROP COLUMN partials"))
            assert "partials" not in {c["name"] for c in inspect(engine).get_columns(TABLE_NAME)}
        finally:
            engine.dispose()
        store = ResultsStore(target.results_url)  # a table from before `plan.partials`
        try:
            assert sync_results(store, study) == 1
            assert store.frame(study.study_name)["partials"].tolist() == ["float"]
        finally:
            store.close()
