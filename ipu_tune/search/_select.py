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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.records import TrialRecord

__all__ = [
    "Compromise", "best_trial", "compromise", "front_distances", "is_feasible", "pareto_front",
    "rank_key",
]


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


@dataclass(frozen=True)
class Compromise:
    """The compromise rule of a multi-objective study, fixed by its feasible Pareto front: each
    objective scaled to [0, 1] over the front (1 = the front's best), the distance to the ideal
    point (1, ..., 1). The exported trial is the front's nearest; the ladder (`ipu_tune.explain`)
    ranks its steps by the same distance."""

    signs: tuple[float, ...]  # +1 maximise, -1 minimise
    lows: tuple[float, ...]  # per objective, oriented larger-is-better, over the front
    highs: tuple[float, ...]

    def distance(self, values: Sequence[float]) -> float:
        """Distance of objective values (as stored) to the ideal point; smaller is better.
        A value beyond the front's best counts as the best (scaled 1), not as a miss."""
        scaled = [min(1.0, (s * x - lo) / (hi - lo)) if hi > lo else 1.0
                  for s, x, lo, hi in zip(self.signs, values, self.lows, self.highs, strict=True)]
        return math.sqrt(sum((1.0 - v) ** 2 for v in scaled))


def _feasible_complete(study: optuna.Study, n: int) -> list[FrozenTrial]:
    return [
        t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.values is not None and len(t.values) == n
        and all(math.isfinite(v) for v in t.values) and is_feasible(t)
    ]


def _rule(front: Sequence[FrozenTrial], signs: Sequence[float]) -> Compromise:
    vals = [_signed(t, signs) for t in front]
    return Compromise(tuple(signs), tuple(min(v[k] for v in vals) for k in range(len(signs))),
                      tuple(max(v[k] for v in vals) for k in range(len(signs))))


def compromise(study: optuna.Study, directions: Sequence[str]) -> Compromise | None:
    """The compromise rule of `study` (None: no feasible trial)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    trials = _feasible_complete(study, len(signs))
    return _rule(pareto_front(trials, signs), signs) if trials else None


def front_distances(study: optuna.Study, directions: Sequence[str]) -> dict[int, float]:
    """A study of several objectives: its feasible Pareto front's trial numbers -> distance to
    the ideal point (smallest: the compromise `best_trial` exports); else {}."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    trials = _feasible_complete(study, len(signs)) if len(signs) > 1 else []
    if not trials:
        return {}
    front = pareto_front(trials, signs)
    rule = _rule(front, signs)
    return {t.number: rule.distance(t.values or ()) for t in front}


def best_trial(study: optuna.Study, directions: Sequence[str]) -> FrozenTrial | None:
    """The best feasible COMPLETE trial by the rules above; None when none is feasible."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    trials = _feasible_complete(study, len(signs))
    if not trials:
        return None
    if len(signs) == 1:
        return max(trials, key=lambda t: (_signed(t, signs)[0], -t.number))
    front = pareto_front(trials, signs)
    rule = _rule(front, signs)
    best = min(range(len(front)), key=lambda i: (
        rule.distance(front[i].values or ()), -_signed(front[i], signs)[0], front[i].number))
    return front[best]


def rank_key(study: optuna.Study,
             directions: Sequence[str]) -> Callable[[Sequence[float]], tuple[float, ...]]:
    """The order `best_trial` ranks objective values by, as a key (smaller first) that also
    ranks plans no trial holds: one objective by its value; several by the distance to the
    ideal point of the study's compromise rule, then the first objective (without a feasible
    trial: the objectives in order)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    rule = compromise(study, directions) if len(signs) > 1 else None
    if rule is None:
        return lambda v: tuple(-s * x for s, x in zip(signs, v, strict=True))
    return lambda v: (rule.distance(v), -signs[0] * v[0])
