"""Two objectives: refine the whole Pareto front, pass after pass, while it improves.

Every feasible plan the climbs meet joins a Pareto archive (`Front`). The first pass climbs to
each end of the front; every pass then climbs into the archive's widest gap, again and again:
an epsilon-constraint climb (maximise the first objective with the second held at least at
the gap's middle level; Haimes, Lasdon & Wismer 1971) reaches the non-convex parts of a front
that weighted sums cannot. Each climb runs to its local optimum (within the pass's budget),
and re-plans the split for the memory level it climbs at (`LocalSearch.climb`), so the middle
of the front does not keep the split of its fast end. The archive's plans that add the most
hypervolume to the study's trials are enqueued (lazy greedy). A pass runs when the queue has
run; passes go on while one enqueues a plan (the front still improves), trials are left and
the study's simulation budget for them (`_FRONT_EVALS_TOTAL`) lasts.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from ipu_tune.records import TrialRecord
from ipu_tune.search._local import LocalSearch, Params, key_of
from ipu_tune.search._objectives import show_value

__all__ = ["Front", "FrontRefiner", "hv2"]

_FRONT_EVALS_FIRST = 8000  # simulations the first front pass may spend
_FRONT_EVALS = 4000  # simulations each later front pass may spend
_FRONT_EVALS_PER_TRIAL = 150  # at most this many simulations per trial left in the budget
_FRONT_EVALS_TOTAL = 24000  # simulations all the passes of one study may spend
_FRONT_ENQUEUE = 48  # plans enqueued by one front pass at most
_FRONT_MIN_GAIN = 0.0001  # least share of the front's hypervolume an enqueued plan adds

Key = tuple[tuple[str, Any], ...]


def hv2(points: list[tuple[float, float]], ref: tuple[float, float]) -> float:
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
    return box - hv2([(min(x, p[0]), min(y, p[1])) for x, y in front], ref)


@dataclass
class _Point:
    values: tuple[float, float]  # oriented, larger is better
    params: Params
    label: str  # the climb that found it


class Front:
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
class FrontRefiner:
    """The front passes of one problem (two objectives)."""

    search: LocalSearch
    params_of: Callable[[FrozenTrial], Params | None]
    enqueue: Callable[[optuna.Study, Params, str], None]
    front: Front | None = None
    passes: int = 0
    spent: int = 0  # simulations of the passes so far
    done: bool = False  # a pass enqueued nothing: the front stopped improving
    gaps_tried: set[tuple[Key, Key]] = field(default_factory=set)
    label: str = ""  # the climb running now (labels the plans it meets)

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

    def _seed(self, ok: list[FrozenTrial], signs: list[float]) -> set[Key]:
        """The study's own plans join the front (they are not enqueued again)."""
        assert self.front is not None
        tried: set[Key] = set()
        for t in ok:
            p = self.params_of(t)
            if p is not None:
                tried.add(key_of(p))
                self.front.add(tuple(s * v for s, v in zip(signs, t.values, strict=True)), p,
                               f"trial {t.number}")
        return tried

    def run(self, study: optuna.Study, done: list[FrozenTrial], left: int | None) -> int:
        """One pass: the front's ends (first pass), then its widest gaps; returns the plans
        enqueued (at most `_FRONT_ENQUEUE` and `left`, each adding at least
        `_FRONT_MIN_GAIN` of the front's hypervolume)."""
        if self.done:
            return 0
        ls, problem = self.search, self.search.problem
        signs = [1.0 if d == "maximize" else -1.0 for d in problem.directions]
        ok = [t for t in done if t.values and all(math.isfinite(v) for v in t.values)
              and TrialRecord.of(t).feasible]
        if not ok:
            return 0
        first = self.front is None
        self.passes += 1
        if self.front is None:
            self.front = Front()
            ls.on_feasible = self._record
        tried = self._seed(ok, signs)
        ls.scales = tuple(max(abs(s * t.values[k]) for t in ok) or 1.0
                          for k, s in enumerate(signs))
        spend = _FRONT_EVALS_FIRST if first else _FRONT_EVALS
        if left is not None:  # a short study cannot run many plans: search less for it
            spend = min(spend, _FRONT_EVALS_PER_TRIAL * left)
        spend = min(spend, _FRONT_EVALS_TOTAL - self.spent)
        if spend <= 0:
            self.done = True
            return 0
        begin = ls.evals
        budget = ls.evals + spend
        if first:  # the two ends of the front, each climbed to its local optimum
            names = problem.objective_names
            for k in range(2):
                start = self.params_of(max(ok, key=lambda t: signs[k] * t.values[k]))
                if start is not None:
                    self._climb_as(f"Pareto local search: best {names[k]}", start,
                                   ls.evals + (budget - ls.evals) // (2 - k) // 2,
                                   weights=tuple(1.0 if j == k else 0.0 for j in range(2)))
        while ls.evals < budget and self._fill_widest_gap(budget, signs):
            pass
        self.spent += ls.evals - begin
        n = self._enqueue_front(study, tried, left)
        self.done = n == 0
        return n

    def _fill_widest_gap(self, budget: int, signs: list[float]) -> bool:
        """An epsilon-constraint climb into the widest gap not tried yet (False: none)."""
        assert self.front is not None and self.search.scales is not None
        sx, sy = self.search.scales
        pts = self.front.points  # ascending first objective, descending second
        gaps = [((b.values[0] - a.values[0]) * (a.values[1] - b.values[1]) / (sx * sy), a, b)
                for a, b in itertools.pairwise(pts)
                if (key_of(a.params), key_of(b.params)) not in self.gaps_tried]
        if not gaps:
            return False
        _, low, high = max(gaps, key=lambda g: g[0])  # low: more of objective 1, less of 0
        self.gaps_tried.add((key_of(low.params), key_of(high.params)))
        names = self.search.problem.objective_names
        # The first objective's climb (it repairs plans that do not fit), to its local
        # optimum within the pass's budget.
        level = (low.values[1] + high.values[1]) / 2
        bound = show_value(names[1], signs[1] * level)
        label = (f"Pareto local search: best {names[0]} with {names[1]} "
                 f"{'>=' if signs[1] > 0 else '<='} {bound}")
        self._climb_as(label, low.params, budget, epsilon=(0, 1, level))
        return True

    def _enqueue_front(self, study: optuna.Study, tried: set[Key], left: int | None) -> int:
        """Enqueue the front's plans adding the most hypervolume to the study's trials
        (lazy greedy: a plan's gain only shrinks as others are added, Minoux 1978)."""
        assert self.front is not None
        pts = self.front.points
        # Reference point: just below the front's worst values, so that its ends add area.
        lows = [min(p.values[k] for p in pts) for k in range(2)]
        highs = [max(p.values[k] for p in pts) for k in range(2)]
        ref = (lows[0] - 0.01 * (highs[0] - lows[0]), lows[1] - 0.01 * (highs[1] - lows[1]))
        chosen_vals = [p.values for p in pts if key_of(p.params) in tried]
        total = hv2([p.values for p in pts], ref)
        keep = _FRONT_ENQUEUE if left is None else min(left, _FRONT_ENQUEUE)
        heap = [(-_gain(chosen_vals, p.values, ref), i) for i, p in enumerate(pts)
                if key_of(p.params) not in tried]
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
            self.enqueue(study, pts[i].params, pts[i].label)
            chosen_vals.append(pts[i].values)
            n += 1
        return n
