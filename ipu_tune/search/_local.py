"""Best-improvement hill climbing with repair over one problem's searched parameters.

Each step takes the best of all *neighbours* of the current plan: every other choice of a
categorical knob, the nearby and the extreme values of a range, each pipeline cut moved by a
few blocks and chains of neighbouring cuts moved together (`ipu_tune.search._moves`), every
other replication factor (its split balanced for the new stage count). A move that would be
faster but does not fit is *repaired*: memory-saving single moves are added greedily (up to
`_REPAIR_DEPTH`) until it fits (the narrow regions that fit only with several knobs changed
together: offloading + RTS + a low available memory proportion). When a step changed another
knob than the cuts, and at each local optimum, the split re-planned for the plan's stage
costs (`SplitBalancer.rebalanced`) is tried as well. Simulations are cached.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.search._codec import R_PARAM, Codec
from ipu_tune.search._moves import SplitBalancer, cut_moves, cuts_of, with_cuts
from ipu_tune.search._space import KnobSpec

__all__ = ["LocalSearch", "Params", "Problem", "Score", "key_of"]

Params = dict[str, Any]
Score = tuple[float, float]  # (1 feasible | 0 infeasible | -1 invalid, larger-is-better value)

_KICK_KNOBS = 3  # parameters moved at random by one kick (larger kicks: `kick(moves=...)`)
_REPAIR_DEPTH = 3  # memory-saving moves added to a promising move that does not fit
_REPAIR_CANDIDATES = 6  # promising moves repaired per step
_CACHE_SIZE = 20000
_ENUMERATE_UP_TO = 24  # ranges with at most this many values: every value is a neighbour
_REBALANCE_EVALS = 4  # simulations one re-planned split is counted as (its calibration)


class Problem(Protocol):
    """What the refinement reads of `ipu_tune.search.SearchProblem` (no import back)."""

    codec: Codec
    directions: list[str]
    objective_names: list[str]
    profile: ModelProfile
    system: System

    def evaluate(self, cfg: Any, note: str = "") -> Any: ...

    def simulate(self, cfg: Any) -> Any: ...


def key_of(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable key of a parameter set."""
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
    _balancer: SplitBalancer | None = None

    @property
    def codec(self) -> Codec:
        return self.problem.codec

    # -- scoring ---------------------------------------------------------------------------
    def score(self, params: Mapping[str, Any]) -> Score:
        return self._scored(params)[0]

    def _evaluate(self, params: Mapping[str, Any]) -> _Eval:
        key = key_of(params)
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
        """`params` with another replication factor: a split balanced in time for the new
        stage count (`SplitBalancer.time_balanced`) and the moot knobs dropped."""
        codec = self.codec
        out = {k: v for k, v in params.items() if ".cut" not in k}
        if len(codec.r_options) > 1:
            out[R_PARAM] = replicas
        stages = codec.stages_of(replicas)
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
        if codec.split_search is not None and stages > 1:
            out = with_cuts(out, self.balancer.time_balanced(out, stages))
        return out

    @property
    def balancer(self) -> SplitBalancer:
        if self._balancer is None:
            self._balancer = SplitBalancer(self.problem)
        return self._balancer

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
            for cuts in cut_moves(cuts_of(params, stages), codec.cut_step, codec.cut_high()):
                yield with_cuts(params, cuts)
        for key, cond, active in (("plan.pipeline.schedule", codec.schedule_spec, stages > 1),
                                  ("plan.replicated_tensor_sharding", codec.rts_spec,
                                   replicas >= 2)):
            if cond is not None and active:
                for c in cond.choices:
                    if c != params.get(key):
                        yield {**params, key: c}
        for key in codec.running(params):  # drawn where the plan runs them (partials)
            for c in Codec._values(codec.conditional[key]):
                if c != params.get(key):
                    yield {**params, key: c}

    def rebalanced(self, params: Params, score: Score) -> tuple[Score, Params] | None:
        """`params` with its split re-planned for its stage costs, when that scores better."""
        moved = self.balancer.rebalanced(params)
        if moved is None:
            return None
        self.evals += _REBALANCE_EVALS
        s = self.score(moved)
        return (s, moved) if s > score else None

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

    def _step(self, current: Params, score: Score, budget: int) -> tuple[Score, Params]:
        """The best neighbour of `current` (repaired when only an infeasible one is faster)."""
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
        return best_score, best

    def climb(self, start: Params, budget: int) -> tuple[Score, Params]:
        """The local optimum reached from `start` (or the best plan seen when out of budget).

        After a step that changed another knob than the cuts, and at a local optimum, the
        plan with its split re-planned for its stage costs is tried too."""
        current, score = dict(start), self.score(start)
        while self.evals < budget:
            best_score, best = self._step(current, score, budget)
            if best is not current and _other_than_cuts(best, current):
                better = self.rebalanced(best, best_score)
                if better is not None:
                    best_score, best = better
            elif best is current:
                better = self.rebalanced(current, score)
                if better is None:
                    break
                best_score, best = better
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
        for key in codec.running(params):
            params[key] = self.rng.choice(Codec._values(codec.conditional[key]))
        return params

    def kick(self, params: Params, moves: int = _KICK_KNOBS) -> Params:
        """`params` with `moves` random neighbourhood moves applied one after another."""
        out = dict(params)
        for _ in range(moves):
            options = list(self.neighbours(out))
            if options:
                out = self.rng.choice(options)
        return out


def _other_than_cuts(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two plans differ in another parameter than the pipeline cuts."""
    keys = set(a) | set(b)
    return any(a.get(k) != b.get(k) for k in keys if ".cut" not in k)
