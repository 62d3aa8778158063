"""Local refinement: hill climbing over each knob's neighbours, in process, between trials.

One simulation costs well under a millisecond; one stored Optuna trial costs tens of
milliseconds. So the search spends the simulator, not the storage: after the warm start has
run, `refine_study` climbs from the best finished trials (and a few seeded random plans)
through the searched parameters, each step taking the best of all *neighbours* of the
current plan (every other choice of a categorical knob, the nearby and the extreme values of
a range, each pipeline cut moved by a few blocks, every other replication factor). A move
that would be faster but does not fit is *repaired*: memory-saving single moves are added
greedily (up to `_REPAIR_DEPTH`) until it fits (the narrow regions that fit only with
several knobs changed together: offloading + RTS + a low available memory proportion).
Only the local optima are recorded: each is enqueued as a real trial, labelled
``local search from trial N`` (`TrialRecord.origin_attrs`), so every plan the study reports
is a trial with its stored result and results row. When the best has not improved for
`_STALL_TRIALS` trials, an iterated local search restarts from a perturbed best (Lourenço,
Martin & Stützle, *Iterated Local Search*, 2003); an improvement found is enqueued likewise.

Two objectives (the `pareto` preset): every feasible plan the climbs meet joins a Pareto
archive (`_Front`). The first pass climbs to each end of the front, then into the archive's
widest gap, again and again: an epsilon-constraint climb (maximise the first objective with
the second held at least at the gap's middle level; Haimes, Lasdon & Wismer 1971) reaches the
non-convex parts of a front that weighted sums cannot. The archive's plans that add the most
hypervolume to the study's trials are enqueued (lazy greedy); a second pass, once they have
run, fills more gaps. More than two objectives: once, one climb per weighting of the scaled
objectives (each alone, equal weights). No kicks (a front has no single best to stall on).
The sampler's seed seeds the random starts and kicks, so a run is reproducible.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.records import TrialRecord
from ipu_tune.search._codec import R_PARAM, Codec
from ipu_tune.search._objectives import show_value
from ipu_tune.search._space import KnobSpec
from ipu_tune.search._splits import cut_param, even_split

__all__ = ["LocalSearch", "Refiner", "refine_study"]

Params = dict[str, Any]
Score = tuple[float, float]  # (1 feasible | 0 infeasible | -1 invalid, larger-is-better value)

_MULTI_STARTS = 3  # best distinct finished trials climbed from after the warm start
_RANDOM_STARTS = 2  # seeded random plans climbed from as well
_ENQUEUE_FIRST = 3  # distinct local optima recorded as trials after the first pass
_STALL_TRIALS = 15  # finished trials without improvement before an iterated-local-search kick
_KICKS = 6  # perturbations of the best tried per stall
_KICK_KNOBS = 3  # parameters re-drawn at random by one kick
_REPAIR_DEPTH = 3  # memory-saving moves added to a promising move that does not fit
_REPAIR_CANDIDATES = 6  # promising moves repaired per step
_EVALS_PER_CALL = 2500  # simulations one `refine_study` call may spend
_CACHE_SIZE = 20000
_FRONT_PASSES = 2  # two objectives: refinement passes over the front (each once the queue ran)
_FRONT_EVALS_FIRST = 8000  # simulations the first front pass may spend
_FRONT_EVALS = 4000  # simulations each later front pass may spend
_FRONT_EVALS_PER_TRIAL = 150  # at most this many simulations per trial left in the budget
_ANCHOR_EVALS = 2000  # simulations per climb to an end of the front
_GAP_EVALS = 300  # simulations per epsilon-constraint climb into a gap
_FRONT_ENQUEUE = 48  # plans enqueued by one front pass at most
_FRONT_MIN_GAIN = 0.0001  # least share of the front's hypervolume an enqueued plan adds
_ENUMERATE_UP_TO = 24  # ranges with at most this many values: every value is a neighbour


class Problem(Protocol):
    """What the refinement reads of `ipu_tune.search.SearchProblem` (no import back)."""

    codec: Codec
    directions: list[str]
    objective_names: list[str]

    def evaluate(self, cfg: Any, note: str = "") -> Any: ...


def _key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


def _range_values(spec: KnobSpec, current: Any) -> list[Any]:
    """Neighbouring values of a range knob: all of a small range, else near and far ones."""
    assert spec.low is not None and spec.high is not None
    lo, hi = spec.low, spec.high
    try:
        values = Codec._values(spec)
    except Exception:  # a float range without step cannot be enumerated
        values = []
    if values and len(values) <= _ENUMERATE_UP_TO:
        return [v for v in values if v != current]
    cur = float(current)
    near = {cur - 1, cur + 1, cur - 2, cur + 2, cur * 2, cur / 2, cur * 1.25, cur / 1.25, lo, hi}
    if spec.kind == "int":
        near |= {float(1 << k) for k in range(int(hi).bit_length() + 1)}
        out = sorted({round(v) for v in near if lo <= round(v) <= hi})
        if spec.step:
            step = int(spec.step)
            out = sorted({int(lo + step * round((v - lo) / step)) for v in out})
        return [v for v in out if v != current and lo <= v <= hi]
    out_f = sorted({min(max(v, lo), hi) for v in near})
    return [round(v, 12) for v in out_f if not math.isclose(v, cur)]


@dataclass(frozen=True)
class _Eval:
    """One simulated plan, as the climbs read it (cached; the scoring mode is applied after)."""

    values: tuple[float, ...]  # objective values oriented so that larger is better
    feasible: bool
    excess: float  # sum of the violated constraints (0 when feasible)
    potential: float  # samples/s the plan would reach if it fitted (-inf: unknown)
    invalid: bool = False  # the simulator refused the plan (or a value is not finite)


@dataclass
class LocalSearch:
    """Best-improvement hill climbing with repair over one problem's parameters (cached)."""

    problem: Problem
    rng: random.Random
    evals: int = 0
    # Several objectives: climb on sum_k weight_k x value_k / scale_k (each oriented so that
    # larger is better), a weighted-sum scalarisation (Miettinen, Nonlinear Multiobjective
    # Optimization, 1999, 3.1); None: the first objective alone.
    weights: tuple[float, ...] | None = None
    scales: tuple[float, ...] | None = None
    # Epsilon-constraint scalarisation (Haimes, Lasdon & Wismer 1971; Miettinen 1999, 3.2):
    # maximise objective `m` subject to objective `c` >= `level` (both oriented larger is
    # better); reaches the non-convex parts of a front that weighted sums cannot.
    epsilon: tuple[int, int, float] | None = None
    # Called with every feasible plan evaluated (its parameters and oriented values): the
    # Pareto refinement keeps the non-dominated ones.
    on_feasible: Callable[[Params, tuple[float, ...]], None] | None = None
    _cache: OrderedDict[tuple[tuple[str, Any], ...], _Eval] = field(default_factory=OrderedDict)

    @property
    def codec(self) -> Codec:
        return self.problem.codec

    # -- scoring ---------------------------------------------------------------------------
    def score(self, params: Mapping[str, Any]) -> Score:
        return self._scored(params)[0]

    def _evaluate(self, params: Mapping[str, Any]) -> _Eval:
        key = _key(params)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.evals += 1
        decoded = self.codec.decode(params)
        out = self.problem.evaluate(decoded.config, decoded.note)
        signs = [1.0 if d == "maximize" else -1.0 for d in self.problem.directions]
        values = tuple(s * v for s, v in zip(signs, out.values, strict=True))
        if not all(v is not None and math.isfinite(v) for v in values):
            ev = _Eval(values, False, math.inf, -math.inf, invalid=True)
        elif out.feasible:
            ev = _Eval(values, True, 0.0, values[0])
            if self.on_feasible is not None:
                self.on_feasible(dict(params), values)
        else:
            r = out.result
            potential = -math.inf
            if self.problem.objective_names[0] == "throughput" and r.step_time_s > 0 \
                    and math.isfinite(r.step_time_s) and r.samples_per_step:
                potential = r.samples_per_step / r.step_time_s
            ev = _Eval(values, False, sum(max(0.0, c) for c in out.constraints), potential)
        self._cache[key] = ev
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return ev

    def _scored(self, params: Mapping[str, Any]) -> tuple[Score, float]:
        """(score, potential): potential = the score's value the plan would reach if it fitted
        (samples/s when the first objective is throughput)."""
        ev = self._evaluate(params)
        if ev.invalid:
            return (-1.0, 0.0), 0.0
        if self.epsilon is not None:
            m, c, level = self.epsilon
            scale = (self.scales or (1.0,) * len(ev.values))[c] or 1.0
            short = max(0.0, level - ev.values[c]) / abs(scale)
            if ev.feasible and short == 0.0:
                return (1.0, ev.values[m]), ev.values[m]
            potential = ev.values[m] if ev.feasible else (ev.potential if m == 0 else -math.inf)
            return (0.0, -(ev.excess + short)), potential
        if self.weights is None:
            value, potential = ev.values[0], ev.potential
        else:
            scales = self.scales or (1.0,) * len(ev.values)
            value = sum(w * v / sc for w, v, sc in zip(self.weights, ev.values, scales,
                                                       strict=True))
            # Weighted: the throughput term at the samples/s it would reach if it fitted.
            potential = value + self.weights[0] * (ev.potential - ev.values[0]) / scales[0] \
                if math.isfinite(ev.potential) else -math.inf
        if ev.feasible:
            return (1.0, value), value
        return (0.0, -ev.excess), potential

    # -- neighbourhood ---------------------------------------------------------------------
    def _structure(self, params: Params, replicas: int) -> Params:
        """`params` with another replication factor: the even split and the moot knobs."""
        codec = self.codec
        out = {k: v for k, v in params.items() if ".cut" not in k}
        if len(codec.r_options) > 1:
            out[R_PARAM] = replicas
        stages = codec.stages_of(replicas)
        if codec.split_search is not None and stages > 1:
            even = even_split(len(codec.blocks), stages)
            step = codec.cut_step
            for i in range(1, stages):
                cut = 1 + step * round((even[i] - 1) / step)
                out[cut_param(i, stages)] = min(max(cut, 1), codec.cut_high())
        sched_key, rts_key = "plan.pipeline.schedule", "plan.replicated_tensor_sharding"
        if codec.schedule_spec is not None:
            if stages > 1:
                out.setdefault(sched_key, codec.schedule_spec.choices[0])
            else:
                out.pop(sched_key, None)
        if codec.rts_spec is not None:
            if replicas >= 2:
                out.setdefault(rts_key, False)
            else:
                out.pop(rts_key, None)
        return out

    def neighbours(self, params: Params) -> Iterator[Params]:
        codec = self.codec
        for key, spec in codec.knobs.items():
            current = params.get(key)
            values = ([c for c in spec.choices if c != current or type(c) is not type(current)]
                      if not spec.is_range else _range_values(spec, current))
            for v in values:
                yield {**params, key: v}
        replicas = int(params.get(R_PARAM, codec.r_options[0]))
        for r in codec.r_options:
            if r != replicas:
                yield self._structure(params, r)
        stages = codec.stages_of(replicas)
        if codec.split_search is not None and stages > 1:
            step, high = codec.cut_step, codec.cut_high()
            cuts = [int(params[cut_param(i, stages)]) for i in range(1, stages)]
            for i in range(len(cuts)):
                for d in (-3, -2, -1, 1, 2, 3):
                    c = cuts[i] + d * step
                    moved = sorted([*cuts[:i], c, *cuts[i + 1:]])
                    if 1 <= c <= high and len(set(moved)) == len(moved):
                        yield {**params, **{cut_param(j + 1, stages): m
                                            for j, m in enumerate(moved)}}
        for key, cond, active in (("plan.pipeline.schedule", codec.schedule_spec, stages > 1),
                                  ("plan.replicated_tensor_sharding", codec.rts_spec,
                                   replicas >= 2)):
            if cond is not None and active:
                for c in cond.choices:
                    if c != params.get(key):
                        yield {**params, key: c}

    # -- climbing --------------------------------------------------------------------------
    def _repair(self, params: Params, beat: Score, budget: int) -> tuple[Score, Params] | None:
        """Greedily add the single move that brings `params` closest to fitting."""
        current = params
        for _ in range(_REPAIR_DEPTH):
            if self.evals >= budget:
                return None
            best: tuple[Score, Params] | None = None
            for n in self.neighbours(current):
                s = self.score(n)
                if s[0] == 1.0 and s > beat:
                    return s, n
                if s[0] == 0.0 and (best is None or s > best[0]):
                    best = (s, n)
            if best is None or best[0] <= self.score(current):
                return None
            current = best[1]
        return None

    def climb(self, start: Params, budget: int) -> tuple[Score, Params]:
        """The local optimum reached from `start` (or the best plan seen when out of budget)."""
        current, score = dict(start), self.score(start)
        while self.evals < budget:
            best, best_score = current, score
            promising: list[tuple[float, Params]] = []
            for n in self.neighbours(current):
                s, potential = self._scored(n)
                if s > best_score:
                    best, best_score = n, s
                elif s[0] == 0.0 and score[0] == 1.0 and potential > score[1]:
                    promising.append((potential, n))
                if self.evals >= budget:
                    break
            if best is current and promising:
                promising.sort(key=lambda pn: -pn[0])
                for _, n in promising[:_REPAIR_CANDIDATES]:
                    fixed = self._repair(n, best_score, budget)
                    if fixed is not None and fixed[0] > best_score:
                        best_score, best = fixed
            if best is current:
                break
            current, score = best, best_score
        return score, current

    def random_params(self) -> Params:
        """A plan drawn uniformly (seeded), with a full set of parameters."""
        codec = self.codec
        params: Params = {}
        for key, spec in codec.knobs.items():
            if not spec.is_range:
                params[key] = self.rng.choice(list(spec.choices))
            elif spec.kind == "float" and not spec.step:
                assert spec.low is not None and spec.high is not None
                params[key] = self.rng.uniform(spec.low, spec.high)
            else:
                params[key] = self.rng.choice(Codec._values(spec))
        replicas = self.rng.choice(list(codec.r_options))
        params = self._structure(params, replicas)
        for key, cond in (("plan.pipeline.schedule", codec.schedule_spec),
                          ("plan.replicated_tensor_sharding", codec.rts_spec)):
            if cond is not None and key in params:
                params[key] = self.rng.choice(list(cond.choices))
        return params

    def kick(self, params: Params) -> Params:
        """`params` with `_KICK_KNOBS` of its knobs moved to a random neighbouring value."""
        out = dict(params)
        for _ in range(_KICK_KNOBS):
            options = list(self.neighbours(out))
            if options:
                out = self.rng.choice(options)
        return out


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


def _hv2(points: list[tuple[float, float]], ref: tuple[float, float]) -> float:
    """Area dominated by `points` (larger is better) above `ref` (Zitzler & Thiele 1998)."""
    area, top = 0.0, ref[1]
    for x, y in sorted(points, reverse=True):
        if x > ref[0] and y > top:
            area += (x - ref[0]) * (y - top)
            top = y
    return area


def _gain(front: list[tuple[float, float]], p: tuple[float, float],
          ref: tuple[float, float]) -> float:
    """Hypervolume `p` adds to `front`: its box less the part the front already covers."""
    box = max(0.0, p[0] - ref[0]) * max(0.0, p[1] - ref[1])
    return box - _hv2([(min(x, p[0]), min(y, p[1])) for x, y in front], ref)


@dataclass
class _Point:
    values: tuple[float, float]  # oriented, larger is better
    params: Params
    label: str  # the climb that found it


class _Front:
    """The non-dominated plans of two objectives seen so far, sorted by the first objective
    (then the second is sorted the other way): insertion by bisection."""

    def __init__(self) -> None:
        self.xs: list[float] = []  # first objective, ascending
        self.points: list[_Point] = []  # same order; second objective descending

    def add(self, values: tuple[float, ...], params: Params, label: str) -> None:
        x, y = values[0], values[1]
        i = bisect.bisect_left(self.xs, x)
        if i < len(self.points) and self.points[i].values[1] >= y:
            return  # dominated (or equal) by a plan at least as good on the first objective
        j = i  # plans with x' <= x and y' <= y are dominated: contiguous, just below i
        while j > 0 and self.points[j - 1].values[1] <= y:
            j -= 1
        self.xs[j:i] = [x]
        self.points[j:i] = [_Point((x, y), dict(params), label)]


@dataclass
class Refiner:
    """The refinement state of one process's problem (which trials were climbed from)."""

    search: LocalSearch
    first_pass_done: bool = False
    climbed: set[int] = field(default_factory=set)
    kicked_at: set[int] = field(default_factory=set)
    feasible: dict[int, bool] = field(default_factory=dict)  # by finished trial number
    front: _Front | None = None  # two objectives: the non-dominated plans the climbs met
    front_passes: int = 0
    gaps_tried: set[tuple[tuple[tuple[str, Any], ...], ...]] = field(default_factory=set)
    label: str = ""  # the climb running now (labels the plans it meets)

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
        if len(self.search.problem.directions) == 2:
            return self._front_pass(study, done, left)
        if len(self.search.problem.directions) > 1:
            if self.first_pass_done:
                return 0
            self.first_pass_done = True
            return self._weighted_pass(study, done, budget, left)
        sign = 1.0 if self.search.problem.directions[0] == "maximize" else -1.0
        best = _signed_best(done, sign, self.feasible)
        if not self.first_pass_done:
            self.first_pass_done = True
            return self._first_pass(study, done, sign, budget,
                                    _ENQUEUE_FIRST if left is None else min(left, _ENQUEUE_FIRST))
        if best is None:
            return 0
        if best.number not in self.climbed:
            self.climbed.add(best.number)
            start = self._params(best)
            if start is None:
                return 0
            score, params = self.search.climb(start, budget)
            if score > self.search.score(start):
                self._enqueue(study, params, f"local search from trial {best.number}")
                return 1
            return 0
        last = max(t.number for t in done)
        if last - best.number < _STALL_TRIALS or best.number in self.kicked_at:
            return 0
        self.kicked_at.add(best.number)
        start = self._params(best)
        if start is None:
            return 0
        target = self.search.score(start)
        for _ in range(_KICKS):
            score, params = self.search.climb(self.search.kick(start), budget)
            if score > target:
                self._enqueue(study, params, f"iterated local search from trial {best.number}")
                return 1
        return 0

    def _first_pass(self, study: optuna.Study, done: list[FrozenTrial], sign: float,
                    budget: int, keep: int) -> int:
        starts: list[tuple[str, Params]] = []
        seen: set[tuple[tuple[str, Any], ...]] = set()
        ranked = sorted(done, key=lambda t: self.search.score(self._params(t) or {})
                        if self._params(t) is not None else (-2.0, 0.0), reverse=True)
        for t in ranked:
            p = self._params(t)
            if p is not None and _key(p) not in seen and len(starts) < _MULTI_STARTS:
                seen.add(_key(p))
                starts.append((f"local search from trial {t.number}", p))
                self.climbed.add(t.number)
        for i in range(_RANDOM_STARTS):
            starts.append((f"local search from random plan {i + 1}", self.search.random_params()))
        optima: dict[tuple[tuple[str, Any], ...], tuple[Score, str, Params]] = {}
        for label, start in starts:
            score, params = self.search.climb(start, budget)
            if score[0] == 1.0 and _key(params) not in optima:
                optima[_key(params)] = (score, label, params)
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
            if score[0] == 1.0 and score > ls.score(start) and _key(params) not in found:
                label = "local search, weights " + "/".join(f"{w:g}" for w in weights)
                found[_key(params)] = (label, params)
        chosen = list(found.values())[: len(found) if left is None else left]
        for label, params in chosen:
            self._enqueue(study, params, label)
        return len(chosen)

    # -- two objectives: the whole front -------------------------------------------------------
    def _record(self, params: Params, values: tuple[float, ...]) -> None:
        assert self.front is not None
        self.front.add(values, params, self.label)

    def _climb_as(self, label: str, start: Params, budget: int, *,
                  weights: tuple[float, ...] | None = None,
                  epsilon: tuple[int, int, float] | None = None) -> None:
        """One climb of the front pass; every feasible plan it meets joins the front."""
        ls = self.search
        self.label, ls.weights, ls.epsilon = label, weights, epsilon
        try:
            ls.climb(start, budget)
        finally:
            ls.weights = ls.epsilon = None

    def _front_pass(self, study: optuna.Study, done: list[FrozenTrial],
                    left: int | None) -> int:
        """Two objectives: climb to the front's ends, then fill its widest gaps by
        epsilon-constraint climbs (maximise one objective with the other held at the gap's
        middle level, each way); enqueue the plans met that add the most hypervolume.

        Several passes (`_FRONT_PASSES`), each when the queue has run; the first spends at
        most `_FRONT_EVALS_FIRST` simulations, the others `_FRONT_EVALS` (and at most
        `_FRONT_EVALS_PER_TRIAL` per trial left); each enqueues at most `_FRONT_ENQUEUE` plans
        that add at least `_FRONT_MIN_GAIN` of the front's hypervolume.
        """
        if self.front_passes >= _FRONT_PASSES:
            return 0
        ls, problem = self.search, self.search.problem
        signs = [1.0 if d == "maximize" else -1.0 for d in problem.directions]
        ok = [t for t in done if t.values and all(math.isfinite(v) for v in t.values)
              and TrialRecord.of(t).feasible]
        if not ok:
            return 0
        first = self.front is None
        self.front_passes += 1
        if self.front is None:
            self.front = _Front()
            ls.on_feasible = self._record
        tried: set[tuple[tuple[str, Any], ...]] = set()
        for t in ok:  # the study's own plans are on the front already (not enqueued again)
            p = self._params(t)
            if p is not None:
                tried.add(_key(p))
                self.front.add(tuple(s * v for s, v in zip(signs, t.values, strict=True)), p,
                               f"trial {t.number}")
        ls.scales = tuple(max(abs(s * t.values[k]) for t in ok) or 1.0
                          for k, s in enumerate(signs))
        names = problem.objective_names
        spend = _FRONT_EVALS_FIRST if first else _FRONT_EVALS
        if left is not None:  # a short study cannot run many plans: search less for it
            spend = min(spend, _FRONT_EVALS_PER_TRIAL * left)
        budget = ls.evals + spend
        if first:  # the two ends of the front
            for k in range(2):
                best = max(ok, key=lambda t: signs[k] * t.values[k])
                start = self._params(best)
                if start is not None:
                    self._climb_as(f"Pareto local search: best {names[k]}", start,
                                   min(budget, ls.evals + _ANCHOR_EVALS),
                                   weights=tuple(1.0 if j == k else 0.0 for j in range(2)))
        while ls.evals < budget:
            if not self._fill_widest_gap(budget, signs):
                break
        return self._enqueue_front(study, tried, left)

    def _fill_widest_gap(self, budget: int, signs: list[float]) -> bool:
        """An epsilon-constraint climb into the widest gap not tried yet (False: none)."""
        assert self.front is not None and self.search.scales is not None
        sx, sy = self.search.scales
        pts = self.front.points  # ascending first objective, descending second
        gaps = [((b.values[0] - a.values[0]) * (a.values[1] - b.values[1]) / (sx * sy), a, b)
                for a, b in itertools.pairwise(pts)
                if (_key(a.params), _key(b.params)) not in self.gaps_tried]
        if not gaps:
            return False
        _, low, high = max(gaps, key=lambda g: g[0])  # low: more of objective 1, less of 0
        self.gaps_tried.add((_key(low.params), _key(high.params)))
        names = self.search.problem.objective_names
        # The first objective's climb (it repairs plans that do not fit); the other way
        # round did not add to the front in benchmarks/search_quality.py.
        for m, c, start in ((0, 1, low),):
            cap = min(budget, self.search.evals + _GAP_EVALS)
            level = (low.values[c] + high.values[c]) / 2
            bound = show_value(names[c], signs[c] * level)
            label = (f"Pareto local search: best {names[m]} with {names[c]} "
                     f"{'>=' if signs[c] > 0 else '<='} {bound}")
            self._climb_as(label, start.params, cap, epsilon=(m, c, level))
        return True

    def _enqueue_front(self, study: optuna.Study, tried: set[tuple[tuple[str, Any], ...]],
                       left: int | None) -> int:
        """Enqueue the front's plans adding the most hypervolume to the study's trials
        (lazy greedy: a plan's gain only shrinks as others are added, Minoux 1978)."""
        assert self.front is not None
        pts = self.front.points
        # Reference point: just below the front's worst values, so that its ends add area.
        lows = [min(p.values[k] for p in pts) for k in range(2)]
        highs = [max(p.values[k] for p in pts) for k in range(2)]
        ref = (lows[0] - 0.01 * (highs[0] - lows[0]), lows[1] - 0.01 * (highs[1] - lows[1]))
        chosen_vals = [p.values for p in pts if _key(p.params) in tried]
        total = _hv2([p.values for p in pts], ref)
        keep = _FRONT_ENQUEUE if left is None else min(left, _FRONT_ENQUEUE)
        heap = [(-_gain(chosen_vals, p.values, ref), i) for i, p in enumerate(pts)
                if _key(p.params) not in tried]
        heapq.heapify(heap)
        n = 0
        while heap and n < keep:
            _, i = heapq.heappop(heap)
            gain = _gain(chosen_vals, pts[i].values, ref)
            if heap and gain < -heap[0][0]:
                heapq.heappush(heap, (-gain, i))  # stale: re-rank
                continue
            if gain <= _FRONT_MIN_GAIN * total:
                break
            self._enqueue(study, pts[i].params, pts[i].label)
            chosen_vals.append(pts[i].values)
            n += 1
        return n


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
