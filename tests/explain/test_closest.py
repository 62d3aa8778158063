"""The closest trial of a study where no plan meets its constraints: the smallest total
violation over every constraint, not the memory excess alone."""

from __future__ import annotations

import optuna

from ipu_tune.explain import closest_trial
from ipu_tune.records import TrialRecord

_NAMES = ("memory", "throughput_floor")


def _pruned(study: optuna.Study, constraints: list[float]) -> int:
    trial = study.ask()
    TrialRecord.write_constraints(trial, _NAMES, constraints)
    TrialRecord.write_plan(trial, {"model": {"name": "mnist_cnn"}}, {"step_time_s": 1.0})
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    return trial.number


def test_the_closest_trial_misses_its_constraints_by_the_least_in_total() -> None:
    study = optuna.create_study()
    _pruned(study, [-0.2, 0.9])  # fits in memory, far below the floor
    near = _pruned(study, [0.02, 0.01])  # 2% over the memory, 1% below the floor
    _pruned(study, [0.001, 0.5])  # nearest in memory alone
    found = closest_trial(study)
    assert found is not None and found[0] == near
