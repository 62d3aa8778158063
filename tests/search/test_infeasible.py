"""Infeasible trials: PRUNED without a value (never a 0 that plots as a real one), keeping why.

The study is a real tuner run of the seed experiment, whose own plan does not fit in memory;
every check reads what Optuna, the results store or the plots read.
"""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState

from ipu_tune.cli.studies_cmd import trials_frame
from ipu_tune.records import TrialRecord
from ipu_tune.results import sync_results
from ipu_tune.search import (
    SearchProblem,
    convergence,
    is_feasible,
    refine_study,
    tell_outcome,
)
from ipu_tune.storage import ResultsStore, open_storage, resolve_storage
from ipu_tune.tuner import RunSummary, run
from tests.search._helpers import compose_cfg, make_problem

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, optuna.Study, Path]:
    tmp = tmp_path_factory.mktemp("infeasible")
    cfg = compose_cfg("+experiment=seed_resnet101", "search=throughput")
    cfg.results_dir, cfg.study.n_trials, cfg.study.progress_bar = str(tmp), 14, False
    summary = run(cfg)
    study = optuna.load_study(study_name=summary.study_name,
                              storage=open_storage(resolve_storage(None, str(tmp))))
    return summary, study, tmp


def test_infeasible_trials_are_pruned_without_a_value_and_keep_why(
        seed_run: tuple[RunSummary, optuna.Study, Path]) -> None:
    summary, study, tmp = seed_run
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert pruned and complete  # the seed's own plan (trial 0) does not fit
    assert summary.n_complete == len(pruned) + len(complete) == 14  # PRUNED counts as finished
    assert study.trials[0].state == TrialState.PRUNED
    for t in pruned:
        rec = TrialRecord.of(t)
        assert t.values is None and not rec.feasible and rec.reason
        assert rec.constraints is not None and max(rec.constraints) > 0
        memory = rec.result["memory_per_ipu"]
        if not rec.result["fits"]:  # over a limit: the excess is kept, constraint and bytes
            assert rec.constraints[0] > 0 and max(memory) > 0
            # The memory constraint: the IPU's excess, or its fullest tile's if larger.
            assert rec.constraints[0] >= max(memory) / rec.result["memory_limit_bytes"] - 1 - 1e-9
    assert all(is_feasible(t) and t.values for t in complete)

    rows = ResultsStore(resolve_storage(None, str(tmp)).results_url).frame(study.study_name)
    assert len(rows) == 14
    bad = rows[rows["state"] == "PRUNED"]
    assert len(bad) == len(pruned)
    assert bad["values"].isna().all() and (~bad["feasible"].astype(bool)).all()
    assert bad["reason"].str.len().gt(0).all() and bad["peak_memory_bytes"].notna().all()
    no_fit = bad[~bad["fits"].astype(bool)]
    assert no_fit["throughput"].isna().all()  # not 0 samples/s
    good = rows[rows["state"] == "COMPLETE"]
    assert good["feasible"].astype(bool).all() and (good["throughput"] > 0).all()

    # The `trials` command: no objective value for the infeasible ones.
    problem = make_problem(compose_cfg("+experiment=seed_resnet101", "search=throughput"))
    frame = trials_frame(study, problem)
    axis = "throughput (samples/s)"
    assert frame.loc[~frame["feasible"], axis].isna().all()
    assert (frame.loc[frame["feasible"], axis] > 0).all()
    # Convergence counts every finished trial; the best comes from a feasible one.
    conv = convergence(study, problem.directions, problem.objective_names)
    assert conv.finished == 14 and conv.last_improved in {t.number for t in complete}


def test_optuna_plots_and_dataframe_do_not_put_infeasible_trials_at_zero(
        seed_run: tuple[RunSummary, optuna.Study, Path]) -> None:
    _, study, _ = seed_run
    pruned = {t.number for t in study.get_trials(states=(TrialState.PRUNED,))}
    df = study.trials_dataframe()
    # With metric names set, the value column is named after the metric (as the dashboard).
    (value,) = [c for c in df.columns if c.startswith("value")]
    assert "throughput [samples/s]" in value
    assert df.loc[df["number"].isin(pruned), value].isna().all()
    assert df.loc[df["state"] == "COMPLETE", value].gt(0).all()
    assert not (df[value] == 0).any()
    fig = optuna.visualization.plot_optimization_history(study)
    for trace in fig.data:
        xs = list(trace.x or [])
        ys = [float(y) for y in (trace.y or [])]
        if trace.mode == "markers":  # the trials' points (the best-so-far line spans all)
            assert not pruned & set(xs), trace.name
        # (the best-so-far line is -inf, undrawn, before the first feasible trial)
        assert all(y > 0 for y in ys if math.isfinite(y)), trace.name


def test_tpe_draws_the_same_plans_whether_infeasible_trials_are_pruned_or_zero() -> None:
    """What TPE learns from an infeasible trial is its constraints, not its state."""

    def draws(pruned: bool) -> list[dict[str, object]]:
        problem = make_problem(compose_cfg("model=resnet101", "search=throughput",
                                           "search.warm_start=false"))
        study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
        for _ in range(30):
            trial = study.ask()
            outcome = problem.run_trial(trial)
            if pruned:
                tell_outcome(study, trial, outcome)
            else:
                study.tell(trial, outcome.values)  # the old way: COMPLETE at 0 samples/s
        assert any(t.state == TrialState.PRUNED for t in study.trials) == pruned
        return [t.params for t in study.trials]

    assert draws(True) == draws(False)


def _seed_problem(*extra: str) -> tuple[SearchProblem, dict[str, object]]:
    problem = make_problem(compose_cfg("+experiment=seed_resnet101", "search=throughput",
                                       *extra))
    user = next(w for w in problem.warm_plans() if w.label == "user")
    assert not problem.evaluate(user.config).feasible  # the seed's plan: out of memory
    return problem, dict(user.params)


def test_gp_is_told_infeasible_plans_complete_and_readers_still_see_them_infeasible(
        tmp_path: Path) -> None:
    """GPSampler reads COMPLETE trials only: its infeasible trials stay COMPLETE (with their
    constraints), and the results row still has no objective value."""
    problem, params = _seed_problem("sampler=gp")
    study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
    study.enqueue_trial(params)
    trial = study.ask()
    frozen = tell_outcome(study, trial, problem.run_trial(trial))
    assert frozen.state == TrialState.COMPLETE and not is_feasible(frozen)
    assert problem.best_trial(study) is None
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    sync_results(store, study)
    row = store.frame(study.study_name).iloc[0]
    assert pd.isna(row["values"]) and pd.isna(row["throughput"]) and not row["feasible"]


def test_local_search_climbs_from_pruned_trials_when_nothing_fits_yet() -> None:
    problem, params = _seed_problem()
    study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
    study.enqueue_trial(params)
    trial = study.ask()
    assert tell_outcome(study, trial, problem.run_trial(trial)).state == TrialState.PRUNED
    assert refine_study(study, problem, n_trials=10) >= 1
    waiting = study.get_trials(states=(TrialState.WAITING,))
    trial = study.ask()
    assert waiting and problem.run_trial(trial).feasible  # the climb found a plan that fits
