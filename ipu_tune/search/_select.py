"""Which finished trial is "the best": feasible first, then the objectives.

A trial is feasible when every constraint it carries is <= 0 (Optuna >= 5 keeps them on the
trial; the runner also stores them in the user attribute ``constraints``). Trials without any
constraint record are not trusted as feasible.

Single objective: the best value (ties: the earliest trial).

Several objectives: among the feasible Pareto front, the *compromise* trial: each objective
is scaled over the front to [0, 1] (1 = the front's best), and the trial closest to the
ideal point (1, ..., 1) in Euclidean distance wins (compromise programming, Zeleny 1973);
ties go to the better first objective, then the earliest trial.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.records import TrialRecord

__all__ = ["best_trial", "is_feasible", "pareto_front"]


def is_feasible(trial: FrozenTrial) -> bool:
    return TrialRecord.of(trial).feasible


def _signed(trial: FrozenTrial, signs: Sequence[float]) -> tuple[float, ...]:
    """Objective values oriented so that larger is better."""
    assert trial.values is not None
    return tuple(s * v for s, v in zip(signs, trial.values, strict=True))


def pareto_front(trials: Sequence[FrozenTrial], signs: Sequence[float]) -> list[FrozenTrial]:
    vals = [_signed(t, signs) for t in trials]
    front = []
    for i, a in enumerate(vals):
        dominated = any(
            all(x >= y for x, y in zip(b, a, strict=True)) and b != a
            for j, b in enumerate(vals) if j != i
        )
        if not dominated:
            front.append(trials[i])
    return front


def best_trial(study: optuna.Study, directions: Sequence[str]) -> FrozenTrial | None:
    """The best feasible COMPLETE trial by the rules above; None when none is feasible."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    trials = [
        t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.values is not None and len(t.values) == len(signs)
        and all(math.isfinite(v) for v in t.values) and is_feasible(t)
    ]
    if not trials:
        return None
    if len(signs) == 1:
        return max(trials, key=lambda t: (_signed(t, signs)[0], -t.number))
    front = pareto_front(trials, signs)
    vals = [_signed(t, signs) for t in front]
    lows = [min(v[k] for v in vals) for k in range(len(signs))]
    highs = [max(v[k] for v in vals) for k in range(len(signs))]

    def distance(v: tuple[float, ...]) -> float:
        scaled = [(x - lo) / (hi - lo) if hi > lo else 1.0
                  for x, lo, hi in zip(v, lows, highs, strict=True)]
        return math.sqrt(sum((1.0 - s) ** 2 for s in scaled))

    best = min(range(len(front)), key=lambda i: (distance(vals[i]), -vals[i][0], front[i].number))
    return front[best]
