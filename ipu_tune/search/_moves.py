"""Pipeline moves of the local search: cuts moved alone or as a chain, and re-balanced splits.

A plateau of a pipelined plan often needs several cuts moved at once: when the slowest stage
is the last, shortening it moves every cut one block later, and a single cut moved alone
only shifts the excess onto its neighbour (no gain). So besides each cut alone, the
neighbourhood shifts every chain of neighbouring cuts together (the chains that begin at the
first cut or end at the last, i.e. the whole split moved toward one stage, and the short
inner ones).

A change of another knob changes every stage's cost (precision, micro-batch, recomputation,
memory proportion), so the split that was balanced is not any more: `SplitBalancer` re-plans
it with `balanced_split` (time and memory, calibrated against the simulator,
`ipu_tune.search._warm.balanced_config`), cached per plan. A change of replicas (so of stage
count) keeps the balance: the new cuts minimise the slowest stage's simulated time
(`simulator_block_cycles`, `min_max_starts`), instead of the same number of blocks per stage.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from ipu_tune.plan import plan_from_config
from ipu_tune.search._codec import R_PARAM, Codec
from ipu_tune.search._splits import cut_param, even_split, simulator_block_cycles
from ipu_tune.search._warm import SearchProblem, balanced_config

__all__ = ["SplitBalancer", "cut_moves", "cuts_of", "min_max_starts", "with_cuts"]

_SINGLE_STEPS = (-3, -2, -1, 1, 2, 3)  # a cut alone moves by this many steps
_CHAIN_STEPS = (-2, -1, 1, 2)  # a chain of cuts moves by this many steps together
_INNER_CHAIN = 3  # longest chain neither at the first nor at the last cut
_CACHE_SIZE = 4096

Params = dict[str, Any]


def cuts_of(params: Mapping[str, Any], stages: int) -> list[int]:
    """The cut parameters of an S-stage plan, in order."""
    return [int(params[cut_param(i, stages)]) for i in range(1, stages)]


def with_cuts(params: Mapping[str, Any], cuts: list[int] | tuple[int, ...]) -> Params:
    """`params` with these cuts (an S-stage plan has S-1)."""
    stages = len(cuts) + 1
    return {**params, **{cut_param(j + 1, stages): c for j, c in enumerate(cuts)}}


def _valid(cuts: list[int], high: int) -> bool:
    return all(1 <= c <= high for c in cuts) and all(a < b for a, b in itertools.pairwise(cuts))


def cut_moves(cuts: list[int], step: int, high: int) -> Iterator[list[int]]:
    """Every cut alone by 1-3 steps, then every chain of neighbouring cuts (both ends included)
    that starts at the first cut, ends at the last, or is at most `_INNER_CHAIN` long, shifted
    together by 1-2 steps; each result strictly increasing within 1..high."""
    k = len(cuts)
    for i in range(k):
        for d in _SINGLE_STEPS:
            moved = sorted([*cuts[:i], cuts[i] + d * step, *cuts[i + 1:]])
            if _valid(moved, high):
                yield moved
    for i in range(k):
        for j in range(i + 1, k):
            if not (i == 0 or j == k - 1 or j - i < _INNER_CHAIN):
                continue
            for d in _CHAIN_STEPS:
                moved = [c + d * step if i <= m <= j else c for m, c in enumerate(cuts)]
                if _valid(moved, high):
                    yield moved


def _greedy_starts(times: list[float], stages: int, cap: float) -> list[int] | None:
    """Stage starts packing blocks in order while a stage stays within `cap` (each stage at
    least one block); None when `stages` stages cannot hold them."""
    n, starts, load = len(times), [0], 0.0
    for b, t in enumerate(times):
        must_close = n - b == stages - len(starts)  # one block left per stage to come
        if b > starts[-1] and (load + t > cap or must_close):
            if len(starts) == stages:
                return None
            starts.append(b)
            load = 0.0
        load += t
    return starts if len(starts) == stages and load <= cap * (1 + 1e-12) else None


def min_max_starts(times: list[float], stages: int) -> list[int]:
    """Stage starts of a contiguous split minimising the slowest stage's time: a bisection
    on that time, each candidate checked by greedy packing (the linear partition problem)."""
    lo, hi = max(times), sum(times)
    best = _greedy_starts(times, stages, hi) or list(even_split(len(times), stages))
    for _ in range(60):
        mid = (lo + hi) / 2
        got = _greedy_starts(times, stages, mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
        if hi - lo <= 1e-9 * hi:
            break
    return best


class SplitBalancer:
    """Balanced splits of a problem's plans (cached by everything but the cuts)."""

    def __init__(self, problem: SearchProblem) -> None:
        self.problem = problem
        self._time: OrderedDict[tuple[Any, ...], list[int]] = OrderedDict()
        self._full: OrderedDict[tuple[Any, ...], list[int] | None] = OrderedDict()

    @property
    def codec(self) -> Codec:
        return self.problem.codec

    def _snap(self, starts: tuple[int, ...] | list[int]) -> list[int]:
        """Stage starts as cut parameters (on the cut grid, strictly increasing)."""
        step, high = self.codec.cut_step, self.codec.cut_high()
        out: list[int] = []
        for b in starts[1:]:
            c = min(max(1 + step * round((b - 1) / step), 1), high)
            out.append(max(c, out[-1] + step) if out else c)
        return out

    def time_balanced(self, params: Params, stages: int) -> list[int]:
        """Cuts dividing the blocks' simulated time evenly over `stages` (the even split when
        the simulator's per-block costs are unavailable)."""
        key = (stages, *sorted((k, v) for k, v in params.items() if ".cut" not in k))
        hit = self._time.get(key)
        if hit is not None:
            return hit
        n = len(self.codec.blocks)
        starts: list[int] = list(even_split(n, stages))
        try:
            plan = plan_from_config(self.codec.decode(params).config)
            times = simulator_block_cycles(self.problem.profile, self.problem.system, plan)
        except Exception:  # an invalid plan: the even split
            times = None
        if times is not None and sum(times) > 0:
            starts = min_max_starts(list(times), stages)
        out = self._snap(starts)
        if not _valid(out, self.codec.cut_high()):
            out = self._snap(even_split(n, stages))
        self._remember(self._time, key, out)
        return out

    def rebalanced(self, params: Params) -> Params | None:
        """`params` with the split re-planned for its other knobs (time and memory); None when
        the plan has one stage, its split is not searched, or the planner keeps it."""
        codec = self.codec
        replicas = int(params.get(R_PARAM, codec.r_options[0]))
        stages = codec.stages_of(replicas)
        if codec.split_search is None or stages < 2:
            return None
        key = tuple(sorted((k, v) for k, v in params.items() if ".cut" not in k))
        if key not in self._full:
            cfg = codec.decode(params).config
            try:
                out = balanced_config(self.problem, cfg)
            except Exception:  # an invalid plan: nothing to balance
                cuts = None
            else:
                index = {name: i for i, name in enumerate(codec.blocks)}
                cuts = self._snap([0, *(index[s] for s in out.plan.pipeline.splits)])
            self._remember(self._full, key, cuts)
        cuts = self._full[key]
        if cuts is None or len(cuts) != stages - 1 or not _valid(cuts, codec.cut_high()):
            return None
        moved = with_cuts(params, cuts)
        return None if moved == params else moved

    @staticmethod
    def _remember(cache: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...],
                  value: Any) -> None:
        cache[key] = value
        if len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
