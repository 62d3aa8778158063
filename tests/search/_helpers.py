"""Shared helpers: compose configs with Hydra as the CLI does, build real search problems."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, TuneConfig
from ipu_tune.config._load import typed
from ipu_tune.hardware import system_from_config
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem, SearchSpace, tell_outcome

optuna.logging.set_verbosity(optuna.logging.WARNING)


def compose_cfg(*overrides: str) -> TuneConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=list(overrides)))


def make_problem(cfg: TuneConfig, pinned: Sequence[str] = (),
                 space: SearchSpace | None = None) -> SearchProblem:
    profile = profile_model(cfg.model)
    system = system_from_config(cfg.system)
    return SearchProblem(cfg, profile, system, frozenset(pinned), space=space)


def run_study(problem: SearchProblem, n_trials: int, sampler: optuna.samplers.BaseSampler
              | None = None, warm: bool = True,
              on_outcome: Callable[[optuna.Trial, Any], None] | None = None) -> optuna.Study:
    """The runner's loop in memory: warm start, ask, run_trial, tell (`tell_outcome`)."""
    study = optuna.create_study(directions=problem.directions,
                                sampler=sampler or problem.sampler())
    if warm:
        for params in problem.warm_start()[:n_trials]:
            study.enqueue_trial(params)
    for _ in range(n_trials):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        if on_outcome is not None:
            on_outcome(trial, outcome)
        tell_outcome(study, trial, outcome)  # as the tuner tells it (infeasible: PRUNED)
    return study
