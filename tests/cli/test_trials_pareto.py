"""`trials` of a study of several objectives ranks as the exported trial is chosen: the
Pareto front by distance to the ideal point (the compromise first), and says which trials
are on the front."""

from __future__ import annotations

from pathlib import Path

import optuna

from ipu_tune.cli._trials_table import PARETO, ranked, trials_frame
from ipu_tune.search import best_trial
from ipu_tune.storage import open_storage, resolve_storage
from ipu_tune.tuner import run
from tests.search._helpers import compose_cfg, make_problem

_OVERRIDES = ("model=mnist_cnn", "search.objectives=[throughput,memory]")


def test_the_exported_trial_ranks_first_and_the_front_is_marked(tmp_path: Path) -> None:
    cfg = compose_cfg(*_OVERRIDES)
    cfg.results_dir, cfg.study.n_trials, cfg.study.progress_bar = str(tmp_path), 24, False
    summary = run(cfg)
    study = optuna.load_study(study_name=summary.study_name,
                              storage=open_storage(resolve_storage(None, str(tmp_path))))
    problem = make_problem(compose_cfg(*_OVERRIDES))
    best = best_trial(study, problem.directions)
    assert best is not None
    frame = ranked(trials_frame(study, problem), study, problem)
    assert frame["trial"].iloc[0] == best.number
    on_front = frame[frame[PARETO]]
    assert len(on_front) >= 2  # throughput against memory: more than one plan is best at one
    first, second = (frame.columns[1], frame.columns[2])
    for _, row in frame[frame["feasible"] & ~frame[PARETO]].iterrows():
        # Off the front: some trial on it is at least as good in both objectives.
        assert ((on_front[first] >= row[first]) & (on_front[second] <= row[second])).any()
    # The front comes before every other feasible trial.
    feasible = list(frame[frame["feasible"]][PARETO])
    assert feasible == sorted(feasible, reverse=True)
