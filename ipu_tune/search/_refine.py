"""Local refinement between trials: climbs from the best trials, escapes while budget remains.

One simulation costs well under a millisecond; one stored Optuna trial costs tens of
milliseconds. So the search spends the simulator, not the storage: after the warm start has
run, `refine_study` climbs (`LocalSearch`) from the best finished trials (the best of each
stage count first: the optimum often lies in another structure than the warm start's best) and
a few seeded random plans, each start climbing with a whole call's simulations. Only the local
optima are recorded: each is enqueued as a real trial, labelled ``local search from trial N``
(`TrialRecord.origin_attrs`), so every plan the study reports is a trial with its stored
result and results row.

Escapes (iterated local search; Lourenco, Martin & Stutzle, *Iterated Local Search*, 2003):
whenever the best has not improved for `_STALL_TRIALS` trials, a round of `_KICKS` escapes
runs, and again while trials are left, each round after twice the wait of the one before
(later rounds spend at most `_LATER_ROUND_EVALS` simulations each). The escapes
of a round alternate between a kick of the best (random moves, more of them each round that
fails: `_KICK_GROWTH`) and a restart from a diverse fitting plan (the best finished trial of
another structure, or a seeded random plan), each climbed to its local optimum; an
improvement found is enqueued.

Two objectives (the `pareto` preset): `ipu_tune.search._front`. More than two: once, one
climb per weighting of the scaled objectives (each alone, equal weights). The sampler's seed
seeds the random starts and kicks, so a run is reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.records import TrialRecord
from ipu_tune.search._codec import R_PARAM
from ipu_tune.search._front import FrontRefiner
from ipu_tune.search._local import _KICK_KNOBS, LocalSearch, Params, Score, key_of

__all__ = ["Refiner", "refine_study"]

_MULTI_STARTS = 3  # best distinct finished trials climbed from after the warm start
_RANDOM_STARTS = 2  # seeded random plans climbed from as well
_ENQUEUE_FIRST = 3  # distinct local optima recorded as trials after the first pass
_STALL_TRIALS = 15  # finished trials without improvement before a round of escapes
_KICKS = 6  # escapes per round
_KICK_GROWTH = 2  # random moves a kick gains with each round that found nothing
_KICK_MAX = 12  # random moves of the largest kick
_EVALS_PER_CALL = 2500  # simulations one `refine_study` call may spend
_LATER_ROUND_EVALS = 400  # simulations of each round of escapes after the first


@dataclass
class Refiner:
    """The refinement state of one process's problem (which trials were climbed from)."""

    search: LocalSearch
    first_pass_done: bool = False
    climbed: set[int] = field(default_factory=set)
    feasible: dict[int, bool] = field(default_factory=dict)  # by finished trial number
    rounds: int = 0  # rounds of escapes from the current best that found nothing
    escaped_at: int = -1  # the last trial number a round of escapes ran after
    escape_rounds: list[int] = field(default_factory=list)  # the trials each round ran after
    restarts: int = 0  # random restarts drawn so far (their labels)
    front: FrontRefiner | None = None  # two objectives

    def _enqueue(self, study: optuna.Study, params: Params, label: str) -> None:
        study.enqueue_trial(params, user_attrs=TrialRecord.origin_attrs(label),
                            skip_if_exists=True)

    def _params(self, trial: FrozenTrial) -> Params | None:
        """The trial's parameters when the codec can draw them again (full set)."""
        decoded = self.search.codec.decode(trial.params).config
        return self.search.codec.encode(decoded, exact=False)

    def step(self, study: optuna.Study, left: int | None = None) -> int:
        """Enqueue the improved plans due now (at most `left`); returns how many."""
        if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return 0  # the queue (warm start, earlier refinements) runs first
        # Infeasible trials are PRUNED (`tell_outcome`): still climbed from when nothing fits.
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if not done:
            return 0
        budget = self.search.evals + _EVALS_PER_CALL
        n_objectives = len(self.search.problem.directions)
        if n_objectives == 2:
            if self.front is None:
                self.front = FrontRefiner(self.search, self._params, self._enqueue)
            return self.front.run(study, done, left)
        if n_objectives > 1:
            if self.first_pass_done:
                return 0
            self.first_pass_done = True
            return self._weighted_pass(study, done, budget, left)
        sign = 1.0 if self.search.problem.directions[0] == "maximize" else -1.0
        if not self.first_pass_done:
            self.first_pass_done = True
            return self._first_pass(study, done, sign,
                                    _ENQUEUE_FIRST if left is None else min(left, _ENQUEUE_FIRST))
        best = _signed_best(done, sign, self.feasible)
        if best is None:
            return 0
        if best.number not in self.climbed:
            self.climbed.add(best.number)
            self.rounds = 0
            start = self._params(best)
            if start is None:
                return 0
            score, params = self.search.climb(start, budget)
            if score > self.search.score(start):
                self._enqueue(study, params, f"local search from trial {best.number}")
                return 1
            return 0
        return self._escape(study, done, best, budget)

    def _escape(self, study: optuna.Study, done: list[FrozenTrial], best: FrozenTrial,
                budget: int) -> int:
        """A round of escapes when the best has stalled (see the module docstring)."""
        last = max(t.number for t in done)
        # The wait doubles with each round that found nothing: a study that has found its
        # optimum stays about as fast as without the later rounds.
        if last - max(best.number, self.escaped_at) < _STALL_TRIALS << min(self.rounds, 8):
            return 0
        self.escaped_at = last
        self.escape_rounds.append(last)
        start = self._params(best)
        if start is None:
            return 0
        target = self.search.score(start)
        moves = min(_KICK_MAX, _KICK_KNOBS + _KICK_GROWTH * self.rounds)
        others = self._diverse_starts(done, start) if self.rounds else []
        if self.rounds:  # later rounds: a small budget each
            budget = min(budget, self.search.evals + _LATER_ROUND_EVALS)
        for i in range(_KICKS):
            if self.search.evals >= budget:
                break
            if i % 2 == 1 and others:
                label, origin = others.pop(0)
            else:
                label = f"iterated local search from trial {best.number}"
                origin = self.search.kick(start, moves)
            score, params = self.search.climb(origin, budget)
            if score > target:
                self._enqueue(study, params, label)
                return 1
        self.rounds += 1
        return 0

    def _diverse_starts(self, done: list[FrozenTrial], best: Params) -> list[tuple[str, Params]]:
        """Restart points unlike the best: the best fitting trial of each other replication
        factor (so stage count), then a seeded random plan."""
        out: list[tuple[str, Params]] = []
        by_structure: dict[Any, tuple[Score, int, Params]] = {}
        for t in done:
            if not self.feasible.get(t.number, False):
                continue
            p = self._params(t)
            if p is None or p.get(R_PARAM) == best.get(R_PARAM):
                continue
            s = self.search.score(p)
            hit = by_structure.get(p.get(R_PARAM))
            if hit is None or s > hit[0]:
                by_structure[p.get(R_PARAM)] = (s, t.number, p)
        for _, number, p in sorted(by_structure.values(), key=lambda x: x[0], reverse=True):
            out.append((f"local search restart from trial {number}", p))
        self.restarts += 1
        out.append((f"local search restart from random plan {self.restarts}",
                    self.search.random_params()))
        return out

    def _first_pass(self, study: optuna.Study, done: list[FrozenTrial], sign: float,
                    keep: int) -> int:
        starts: list[tuple[str, Params]] = []
        seen: set[tuple[tuple[str, Any], ...]] = set()
        decoded = [(t, p) for t in done if (p := self._params(t)) is not None]
        ranked = sorted(decoded, key=lambda tp: self.search.score(tp[1]), reverse=True)
        structures: set[Any] = set()
        for first_of_structure in (True, False):  # the best of each stage count first
            for t, p in ranked:
                if (key_of(p) in seen or len(starts) >= _MULTI_STARTS
                        or (first_of_structure and p.get(R_PARAM) in structures)):
                    continue
                seen.add(key_of(p))
                structures.add(p.get(R_PARAM))
                starts.append((f"local search from trial {t.number}", p))
                self.climbed.add(t.number)
        for i in range(_RANDOM_STARTS):
            starts.append((f"local search from random plan {i + 1}", self.search.random_params()))
        optima: dict[tuple[tuple[str, Any], ...], tuple[Score, str, Params]] = {}
        for label, start in starts:  # each start climbs with a whole call's simulations
            score, params = self.search.climb(start, self.search.evals + _EVALS_PER_CALL)
            if score[0] == 1.0 and key_of(params) not in optima:
                optima[key_of(params)] = (score, label, params)
        best = _signed_best(done, sign, self.feasible)
        floor = (1.0, sign * best.values[0]) if best is not None and best.values else (0.0, -1e300)
        chosen = sorted(optima.values(), key=lambda slp: slp[0], reverse=True)[:keep]
        n = 0
        for score, label, params in chosen:
            if score > floor or n == 0:
                self._enqueue(study, params, label)
                n += 1
        return n


    def _weighted_pass(self, study: optuna.Study, done: list[FrozenTrial], budget: int,
                       left: int | None) -> int:
        """Several objectives: one climb per weighting, from the finished trial that weighting
        ranks first; each distinct optimum is enqueued (the front's ends and knee)."""
        problem = self.search.problem
        n = len(problem.directions)
        ok = [t for t in done if t.values and all(math.isfinite(v) for v in t.values)
              and TrialRecord.of(t).feasible]
        if not ok:
            return 0
        scales = tuple(max(abs(t.values[k]) for t in ok) or 1.0 for k in range(n))
        weightings = [tuple(1.0 if j == k else 0.0 for j in range(n)) for k in range(n)]
        weightings.append(tuple(1.0 / n for _ in range(n)))
        share = max(1, (budget - self.search.evals) // len(weightings))
        found: dict[tuple[tuple[str, Any], ...], tuple[str, Params]] = {}
        for weights in weightings:
            ls = LocalSearch(problem, self.search.rng, weights=weights, scales=scales)
            starts = [p for p in (self._params(t) for t in ok) if p is not None]
            if not starts:
                return 0
            start = max(starts, key=ls.score)
            score, params = ls.climb(start, share)
            self.search.evals += ls.evals
            if score[0] == 1.0 and score > ls.score(start) and key_of(params) not in found:
                label = "local search, weights " + "/".join(f"{w:g}" for w in weights)
                found[key_of(params)] = (label, params)
        chosen = list(found.values())[: len(found) if left is None else left]
        for label, params in chosen:
            self._enqueue(study, params, label)
        return len(chosen)


def _signed_best(trials: list[FrozenTrial], sign: float,
                 feasible: dict[int, bool] | None = None) -> FrozenTrial | None:
    """The best finite feasible trial; `feasible` caches each finished trial's feasibility by
    number (it never changes), so a call per trial does not decode every trial's record."""
    known = {} if feasible is None else feasible

    def fits(t: FrozenTrial) -> bool:
        hit = known.get(t.number)
        if hit is None:
            hit = known[t.number] = TrialRecord.of(t).feasible
        return hit

    ok = [t for t in trials if t.values and math.isfinite(t.values[0]) and fits(t)]
    return max(ok, key=lambda t: (sign * t.values[0], -t.number), default=None)



def refine_study(study: optuna.Study, problem: Any, n_trials: int | None = None) -> int:
    """The trial loop's hook, called after each finished trial: enqueue refined plans.

    `n_trials` is the study's budget: nothing is refined once it is used up, and at most
    the trials left are enqueued. Returns the number of trials enqueued (0 when the problem
    does not refine: several objectives, a baseline sampler, or nothing due).
    """
    refiner = problem.refiner()
    if refiner is None:
        return 0
    left = None
    if n_trials is not None:
        used = study.get_trials(deepcopy=False, states=(
            TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING))
        left = n_trials - len(used)
        if left <= 0:
            return 0
    return int(refiner.step(study, left))
