"""An independent reference optimum for `search_quality.py`: no code shared with the search.

It reads the preset's space file itself (YAML), the public knob registry (`ipu_tune.knobs`)
for the natural domains, and evaluates plans through the public case/simulator API
(`ipu_tune.config.validate`, `ipu_tune.case.build_case`, `ipu_tune.simulator.simulate`), so a
move the search lacks cannot hide from it.

- Small spaces (at most `--exhaustive-up-to` plans): every plan is simulated.
- Larger ones: a full coordinate descent (first improvement, in a shuffled order) over every
  value of every knob, every position of every cut, every pair of cuts shifted together, every
  chain of neighbouring cuts shifted together (1..4 blocks), and every replication factor (each
  with its cuts descended); from the user's plan and `restarts` seeded random plans, then
  perturbations of the best (3..6 random moves) while they improve it.
- Two objectives (throughput, memory headroom): the same descent as an epsilon-constraint
  sweep (the most samples/s with headroom at least each of 41 levels), from the best plan known
  at each level; the hypervolume (reference point 0, 0) of every feasible plan met.

Infeasible plans are ranked by their memory excess (the most loaded IPU's bytes over its
limit), so a descent from a plan that does not fit first makes it fit.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from ipu_tune.case import build_case, build_system
from ipu_tune.config import SPACES_DIR, EvalConfig, TuneConfig, validate
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import knob, set_key
from ipu_tune.models import profile_model
from ipu_tune.simulator import simulate

State = tuple[tuple[str, Any], ...]  # sorted (key, value); splits: a tuple of block indices
_R, _CUTS = "plan.replication_factor", "plan.pipeline.splits"
_SCHED, _RTS = "plan.pipeline.schedule", "plan.replicated_tensor_sharding"


@dataclass(frozen=True)
class Point:
    feasible: bool
    throughput: float
    headroom: float
    excess: float  # memory over the limit (share), 0 when it fits; inf: invalid


class RefSpace:
    """The preset's space over the composed config, evaluated with the public API."""

    def __init__(self, cfg: TuneConfig, pinned: frozenset[str] = frozenset()) -> None:
        self.base = EvalConfig(model=cfg.model, workload=copy.deepcopy(cfg.workload),
                               system=cfg.system, plan=copy.deepcopy(cfg.plan))
        self.profile = profile_model(cfg.model)
        self.system = build_system(self.base)
        data = yaml.safe_load((SPACES_DIR / f"{cfg.search.space}.yaml").read_text())
        assert not data.get("fixed") and not data.get("constraints"), "not supported here"
        self.training = self.base.workload.mode == "train"
        self.blocks = list(self.profile.blocks)
        self.ipus = cfg.system.num_ipus
        self.values: dict[str, list[Any]] = {}
        self.cond: dict[str, list[Any]] = {}
        self.structural: set[str] = set()
        mode = self.base.workload.mode
        for key, spec in (data.get("knobs") or {}).items():
            k = knob(key)
            if isinstance(spec, dict) and "modes" in spec:  # searched in these modes only
                if mode not in spec["modes"]:
                    continue
                spec = {name: v for name, v in spec.items() if name != "modes"} or None
            if key in pinned or ("training" in k.needs and not self.training) or (
                    "pixels" in k.needs and self.profile.input_kind != "image"):
                continue
            if k.draw in ("replicas", "splits") or key in (_SCHED, _RTS):
                self.structural.add(key)
            if k.draw == "splits" or k.draw == "replicas":
                continue
            if key in (_SCHED, _RTS):  # drawn only with >= 2 stages / replicas
                self.cond[key] = self._values(key, spec or {})
                continue
            self.values[key] = self._values(key, spec or {})
        self.replicas = [r for r in (1 << i for i in range(self.ipus.bit_length()))
                         if self.ipus % r == 0 and self.ipus // r <= len(self.blocks)]
        if _R not in self.structural:
            self.replicas = [self.base.plan.replication_factor]
        self.cache: dict[State, Point] = {}

    def _values(self, key: str, spec: dict[str, Any]) -> list[Any]:
        k = knob(key)
        if "choices" in spec:
            return list(spec["choices"])
        if "low" in spec:
            lo, hi = spec["low"], spec["high"]
            if key == "workload.micro_batch_size":  # searched at or below the user's, never above
                hi = min(hi, self.base.workload.micro_batch_size)
            if k.type is int:
                return list(range(int(lo), int(hi) + 1, int(spec.get("step", 1))))
            step = spec["step"]
            return [round(lo + i * step, 10) for i in range(round((hi - lo) / step) + 1)]
        if k.draw == "instances":
            return [1 << i for i in range(self.ipus.bit_length()) if self.ipus % (1 << i) == 0]
        natural = k.natural
        assert natural, key
        return list(natural)

    # -- evaluation -------------------------------------------------------------------------
    def config(self, state: dict[str, Any]) -> EvalConfig:
        cfg = EvalConfig(model=self.base.model, workload=copy.deepcopy(self.base.workload),
                         system=self.base.system, plan=copy.deepcopy(self.base.plan))
        for key, value in state.items():
            if key == _CUTS:
                set_key(cfg, key, [self.blocks[b] for b in value])
            else:
                set_key(cfg, key, value)
        stages = len(state.get(_CUTS, ())) + 1
        if self.training and stages > 1 and cfg.plan.pipeline.schedule != "sharded":
            # PopTorch refuses pipelined training with fewer micro-batches than stages.
            cfg.plan.gradient_accumulation = max(cfg.plan.gradient_accumulation, stages)
        return cfg

    def evaluate(self, state: dict[str, Any]) -> Point:
        key = tuple(sorted(state.items()))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        try:
            cfg = self.config(state)
            validate(cfg)
            case = build_case(cfg, self.profile, self.system)
            r = simulate(case.profile, case.system, case.plan)
        except IpuTuneError:
            pt = Point(False, 0.0, 0.0, math.inf)
        else:
            ratios = [max(m.total_bytes / m.limit_bytes, m.max_tile_bytes / m.tile_limit_bytes)
                      for m in r.memory if m.limit_bytes > 0 and m.tile_limit_bytes > 0]
            head = 1.0 - max((m.total_bytes / m.limit_bytes for m in r.memory
                              if m.limit_bytes > 0), default=0.0)
            excess = 0.0 if r.fits else max(max(ratios, default=1.0) - 1.0, 1e-3)
            pt = Point(bool(r.fits), float(r.throughput), head, excess)
        self.cache[key] = pt
        return pt

    # -- plans ------------------------------------------------------------------------------
    def even_cuts(self, stages: int) -> tuple[int, ...]:
        n = len(self.blocks)
        return tuple(round(s * n / stages) for s in range(1, stages))

    def with_replicas(self, state: dict[str, Any], r: int,
                      cuts: tuple[int, ...] | None = None) -> dict[str, Any]:
        out = dict(state)
        stages = self.ipus // r
        if _R in self.structural:
            out[_R] = r
        if _CUTS in self.structural:
            out[_CUTS] = cuts if cuts is not None else self.even_cuts(stages)
        if _SCHED in self.structural:
            if stages > 1:
                out.setdefault(_SCHED, knob(_SCHED).domain[0])  # type: ignore[index]
            else:
                out.pop(_SCHED, None)
        if _RTS in self.structural and self.training:
            if r >= 2:
                out.setdefault(_RTS, False)
            else:
                out.pop(_RTS, None)
        return out

    def start(self) -> dict[str, Any]:
        """The user's plan in this space's terms."""
        state: dict[str, Any] = {}
        for key in self.values:
            cur = _get(self.base, key)
            state[key] = cur if cur in self.values[key] else self.values[key][0]
        r = self.base.plan.replication_factor
        r = r if r in self.replicas else self.replicas[0]
        names = {b: i for i, b in enumerate(self.blocks)}
        cuts = tuple(names[s] for s in self.base.plan.pipeline.splits if s in names)
        stages = self.ipus // r
        return self.with_replicas(state, r, cuts if len(cuts) == stages - 1 else None)

    def random(self, rng: random.Random) -> dict[str, Any]:
        state = {key: rng.choice(vals) for key, vals in self.values.items()}
        r = rng.choice(self.replicas)
        stages = self.ipus // r
        cuts = tuple(sorted(rng.sample(range(1, len(self.blocks)), stages - 1)))
        state = self.with_replicas(state, r, cuts)
        for key in (_SCHED, _RTS):
            if key in state:
                state[key] = rng.choice(self._cond_values(key))
        return state

    def _cond_values(self, key: str) -> list[Any]:
        return self.cond[key]

    def size(self) -> int:
        total = 0
        for r in self.replicas:
            stages = self.ipus // r
            n = math.comb(len(self.blocks) - 1, stages - 1) if _CUTS in self.structural else 1
            for key in (_SCHED, _RTS):
                active = stages > 1 if key == _SCHED else r >= 2 and self.training
                if key in self.structural and active:
                    n *= len(self._cond_values(key))
            total += n
        return total * math.prod(len(v) for v in self.values.values())

    def all_plans(self) -> Iterator[dict[str, Any]]:
        keys = list(self.values)
        for combo in itertools.product(*(self.values[k] for k in keys)):
            base = dict(zip(keys, combo, strict=True))
            for r in self.replicas:
                stages = self.ipus // r
                cut_sets = (itertools.combinations(range(1, len(self.blocks)), stages - 1)
                            if _CUTS in self.structural else [None])
                for cuts in cut_sets:
                    plan = self.with_replicas(base, r, cuts)
                    conds = [k for k in (_SCHED, _RTS) if k in plan]
                    for vals in itertools.product(*(self._cond_values(k) for k in conds)):
                        yield {**plan, **dict(zip(conds, vals, strict=True))}

    # -- moves ------------------------------------------------------------------------------
    def cut_moves(self, state: dict[str, Any]) -> Iterator[dict[str, Any]]:
        cuts = state.get(_CUTS)
        if not cuts:
            return
        n, k = len(self.blocks), len(cuts)
        for i in range(k):  # one cut to every position between its neighbours
            lo = cuts[i - 1] + 1 if i else 1
            hi = cuts[i + 1] - 1 if i + 1 < k else n - 1
            for c in range(lo, hi + 1):
                if c != cuts[i]:
                    yield {**state, _CUTS: (*cuts[:i], c, *cuts[i + 1:])}
        for i, j in itertools.combinations(range(k), 2):  # pairs and chains, shifted together
            for d in (-4, -3, -2, -1, 1, 2, 3, 4):
                for group in ({i, j}, set(range(i, j + 1))):
                    moved = tuple(c + d if m in group else c for m, c in enumerate(cuts))
                    if all(1 <= c <= n - 1 for c in moved) and all(
                            a < b for a, b in itertools.pairwise(moved)):
                        yield {**state, _CUTS: moved}

    def moves(self, state: dict[str, Any]) -> Iterator[dict[str, Any]]:
        for key, vals in self.values.items():
            for v in vals:
                if v != state[key]:
                    yield {**state, key: v}
        for key in (_SCHED, _RTS):
            if key in state:
                for v in self._cond_values(key):
                    if v != state[key]:
                        yield {**state, key: v}
        yield from self.cut_moves(state)


def _get(cfg: EvalConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node


# -- the descent --------------------------------------------------------------------------------
Rank = tuple[float, float]


def rank(pt: Point, level: float | None = None) -> Rank:
    """Feasible plans by samples/s, then the others by how far they are from fitting (with
    `level`: a plan below that headroom counts as not fitting by the shortfall)."""
    short = 0.0 if level is None else max(0.0, level - pt.headroom)
    if pt.feasible and short == 0.0:
        return (1.0, pt.throughput)
    return (0.0, -(pt.excess + short))


@dataclass
class Descent:
    space: RefSpace
    rng: random.Random
    level: float | None = None
    budget: int = 60_000  # simulations per descent at most (cache hits are free)

    def score(self, state: dict[str, Any]) -> Rank:
        return rank(self.space.evaluate(state), self.level)

    def _first_better(self, state: dict[str, Any], cur: Rank,
                      moves: list[dict[str, Any]]) -> tuple[dict[str, Any], Rank] | None:
        self.rng.shuffle(moves)
        for m in moves:
            s = self.score(m)
            if s > cur:
                return m, s
        return None

    def fixed_replicas(self, state: dict[str, Any], stop: int) -> tuple[dict[str, Any], Rank]:
        """A local optimum from `state` under every move but a change of replicas."""
        cur = self.score(state)
        while len(self.space.cache) < stop and (
                found := self._first_better(state, cur, list(self.space.moves(state)))):
            state, cur = found
        return state, cur

    def run(self, state: dict[str, Any]) -> tuple[dict[str, Any], Rank]:
        """A local optimum from `state` under every move (replicas last, cuts re-descended)."""
        sp = self.space
        cur = self.score(state)
        stop = len(sp.cache) + self.budget
        while len(sp.cache) < stop:
            state, cur = self.fixed_replicas(state, stop)
            best: tuple[dict[str, Any], Rank] | None = None
            for r in sp.replicas:
                if r != state.get(_R, sp.replicas[0]):
                    cand = self.fixed_replicas(sp.with_replicas(state, r), stop)
                    if cand[1] > cur and (best is None or cand[1] > best[1]):
                        best = cand
            if best is None:
                break
            state, cur = best
        return state, cur

    def kick(self, state: dict[str, Any], moves: int) -> dict[str, Any]:
        sp = self.space
        for _ in range(moves):
            options = list(sp.moves(state))
            options += [sp.with_replicas(state, r) for r in sp.replicas]
            state = self.rng.choice(options)
        return state


def best_throughput(space: RefSpace, restarts: int, seed: int = 12345,
                    max_fails: int = 12) -> tuple[float, str]:
    """The best samples/s found and how (one line)."""
    rng = random.Random(seed)
    d = Descent(space, rng)
    starts = [space.start()] + [space.random(rng) for _ in range(restarts)]
    best = max((d.run(s) for s in starts), key=lambda sr: sr[1])
    fails = kicks = 0
    while fails < max_fails:
        kicks += 1
        cand = d.run(d.kick(best[0], rng.randint(3, 6)))
        if cand[1] > best[1]:
            best, fails = cand, 0
        else:
            fails += 1
    value = best[1][1] if best[1][0] == 1.0 else 0.0
    how = (f"coordinate descent (every value, every cut, cut pairs and chains, replicas) from "
           f"the user's plan and {restarts} random plans, then {kicks} kicks; "
           f"{len(space.cache)} simulations")
    return value, how


def exhaustive_throughput(space: RefSpace) -> tuple[float, str]:
    best = 0.0
    for plan in space.all_plans():
        pt = space.evaluate(plan)
        if pt.feasible:
            best = max(best, pt.throughput)
    return best, f"exhaustive: all {space.size()} plans simulated"


def hypervolume(points: list[tuple[float, float]]) -> float:
    """Area dominated by (maximised) points above the reference point (0, 0)."""
    area, best_y = 0.0, 0.0
    for x, y in sorted((p for p in points if p[0] > 0 and p[1] > 0), reverse=True):
        if y > best_y:
            area += x * (y - best_y)
            best_y = y
    return area


def pareto_hypervolume(space: RefSpace, restarts: int, steps: int = 40,
                       seed: int = 12345) -> tuple[float, str]:
    """Epsilon-constraint sweep over headroom levels with the full descent at each."""
    rng = random.Random(seed)
    best_throughput(space, restarts, seed, max_fails=4)  # the fastest end and many plans
    d = Descent(space, rng, budget=20_000)
    top = max((p.headroom for p in space.cache.values() if p.feasible), default=0.0)
    for _ in range(2):  # twice: the second sweep starts from the first sweep's plans
        for i in range(steps + 1):
            level = top * i / steps
            d.level = level
            known = [(pt.throughput, dict(k)) for k, pt in space.cache.items()
                     if pt.feasible and pt.headroom >= level]
            if not known:
                continue
            d.run(max(known, key=lambda tk: tk[0])[1])
            top = max((p.headroom for p in space.cache.values() if p.feasible), default=0.0)
    pts = [(p.throughput, p.headroom) for p in space.cache.values() if p.feasible]
    return hypervolume(pts), (
        f"epsilon-constraint sweep (2 x {steps + 1} headroom levels, each a full coordinate "
        f"descent from the best plan known at that level) after {restarts} restarts; "
        f"{len(space.cache)} simulations, hypervolume of the {len(pts)} feasible plans met")


def reference(cfg: TuneConfig, pareto: bool, restarts: int, pinned: frozenset[str] = frozenset(),
              exhaustive_up_to: int = 200_000) -> tuple[float, str]:
    """The reference optimum of a composed config (`pinned`: keys never searched) and how it
    was built: exhaustive when the space has at most `exhaustive_up_to` plans."""
    space = RefSpace(cfg, pinned)
    if pareto:
        return pareto_hypervolume(space, restarts)
    if space.size() <= exhaustive_up_to:
        return exhaustive_throughput(space)
    return best_throughput(space, restarts)
