"""Warm start: plans enqueued before the sampler draws anything.

In order:

1. ``user``: the user's own plan (with the preset's fixed values), when the space can express
   it exactly.
2. ``balanced``: the user's plan with the pipeline split of `balanced_split` (PipeDream's
   dynamic programme: slowest stage minimised, every stage fitting in memory), its memory
   estimate calibrated against the simulator until the split stops moving; when it does not
   fit, also ``balanced, micro-batch N``: the same plan at the largest micro-batch that fits.
3. Only for the ``changes`` objective (the `fit` preset): the user's plan with each single
   memory-saving change (``one change: <key>``), and the fitting plans with the fewest such
   changes found breadth-first over sets of up to three (``fewest changes``).
4. ``rules of thumb, <S> stages``: for every stage count, the seed guide's settings: half
   precision (the seed session: "Top priority is to use FP16"), prefetch depth 3 (guide
   4.4.1), I/O tiles from N_IO ~ 1.05 x bytes(micro-batch) / S_tile rounded up to an allowed
   value (guide 4.4.2) where they can hide the stream (one stage, not synthetic data; none
   otherwise), 8-bit I/O and an asynchronous loader with 16 workers (seed session;
   pipelining tutorial), gradient accumulation >= 4 x stages (guide 4.2: much more than the
   stages) and device iterations >= 4 (seed session), with a balanced split; when that does
   not fit, memory-saving changes are added greedily until it does (`make_fit`).
5. ``memory savers``: FP16, recomputation checkpoints, offloaded optimiser state, the
   interleaved schedule and a balanced split.

Only searched knobs are changed, so pins and fixed values hold in every plan.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ipu_tune import interrupts
from ipu_tune.config import EvalConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import plan_from_config
from ipu_tune.search._codec import R_PARAM, Codec, set_key
from ipu_tune.search._objectives import get_key, memory_constraint
from ipu_tune.search._space import KnobSpec
from ipu_tune.search._splits import StageCostModel, balanced_split, simulator_block_cycles
from ipu_tune.simulator import SimResult


class SearchProblem(Protocol):
    """What the warm start reads of `ipu_tune.search.SearchProblem` (no import back: the
    problem imports this module)."""

    codec: Codec
    profile: ModelProfile
    system: System
    objective_names: list[str]

    def simulate(self, cfg: EvalConfig) -> SimResult: ...

__all__ = [
    "WarmPlan",
    "balanced_config",
    "fewest_changes",
    "io_tiles_rule",
    "largest_fitting_micro_batch",
    "make_fit",
    "warm_start_plans",
]

# Share of an IPU assumed taken by code, exchange and buffers before calibration.
_INITIAL_FIXED_SHARE = 0.15
_CALIBRATION_ROUNDS = 4
_WORKERS = 16  # the pipelining tutorial's num_workers


@dataclass(frozen=True)
class WarmPlan:
    label: str
    config: EvalConfig
    params: dict[str, Any]


def _searched(problem: SearchProblem, key: str) -> bool:
    c = problem.codec
    return (key in c.knobs or key in c.conditional
            or (key == "plan.pipeline.schedule" and c.schedule_spec is not None)
            or (key == "plan.replicated_tensor_sharding" and c.rts_spec is not None)
            or (key == R_PARAM and len(c.r_options) > 1))


def _spec(problem: SearchProblem, key: str) -> KnobSpec | None:
    c = problem.codec
    if key == "plan.pipeline.schedule":
        return c.schedule_spec
    if key == "plan.replicated_tensor_sharding":
        return c.rts_spec
    return c.knobs.get(key, c.conditional.get(key))


def _allowed(problem: SearchProblem, key: str, value: Any) -> bool:
    """`value` is one the space can draw for `key` (ranges: within low..high)."""
    spec = _spec(problem, key)
    if spec is None:
        return False
    if not spec.is_range:
        return any(c == value and isinstance(c, bool) == isinstance(value, bool)
                   for c in spec.choices)
    assert spec.low is not None and spec.high is not None
    return spec.low <= value <= spec.high


def _set(problem: SearchProblem, cfg: EvalConfig, key: str, value: Any) -> None:
    if _searched(problem, key):
        set_key(cfg, key, value)


def io_tiles_rule(cfg: EvalConfig, input_elements: int, tile_bytes: int,
                  choices: tuple[int, ...]) -> int:
    """Seed guide 4.4.2: N_IO ~ 1.05 x bytes(micro-batch) / S_tile, rounded up to a choice."""
    per_element = 1 if cfg.plan.eight_bit_io else (2 if cfg.plan.precision.startswith("16") else 4)
    need = 1.05 * cfg.workload.micro_batch_size * input_elements * per_element / tile_bytes
    allowed = sorted(c for c in choices if c > 0)
    if not allowed:
        return 0
    return next((c for c in allowed if c >= math.ceil(need)), allowed[-1])


def balanced_config(problem: SearchProblem, cfg: EvalConfig) -> EvalConfig:
    """`cfg` with the balanced split for its stage count (unchanged when splits are fixed)."""
    codec = problem.codec
    stages = codec.stages_of(cfg.plan.replication_factor)
    if codec.split_search is None or stages == 1 or stages > len(codec.blocks):
        return cfg  # nothing to balance, or more stages than blocks: no split exists
    plan = plan_from_config(cfg)
    model = StageCostModel(problem.profile, plan,
                           simulator_block_cycles(problem.profile, problem.system, plan))
    limit = float(problem.system.ipu.sram_bytes)
    offsets = [_INITIAL_FIXED_SHARE * limit] * stages
    n = len(codec.blocks)
    best: tuple[tuple[bool, float], EvalConfig] | None = None
    seen: set[tuple[int, ...]] = set()
    for _ in range(_CALIBRATION_ROUNDS):
        starts = balanced_split(model, stages, limit, offsets)
        if starts in seen:
            break
        seen.add(starts)
        out = copy.deepcopy(cfg)
        out.plan.pipeline.splits = [codec.blocks[b] for b in starts[1:]]
        try:
            result = problem.simulate(out)
        except IpuTuneError:
            break
        score = (result.fits, result.throughput)
        if best is None or score > best[0]:
            best = (score, out)
        ends = [*starts[1:], n]
        for m in result.memory:
            if 0 <= m.stage < stages and m.limit_bytes > 0 and m.tile_limit_bytes > 0:
                # What the estimate leaves out, as the simulator sees it (tile excess included).
                ratio = m.fullness
                est = model.stage_memory_bytes(starts[m.stage], ends[m.stage], m.stage, stages)
                offsets[m.stage] = ratio * limit - est
    return best[1] if best is not None else cfg


def _rules_of_thumb(problem: SearchProblem, replicas: int) -> EvalConfig:
    codec = problem.codec
    cfg = copy.deepcopy(codec.base)
    stages = codec.stages_of(replicas)
    cfg.plan.replication_factor = replicas
    if stages == 1:
        cfg.plan.pipeline.splits = []
    if replicas < 2:
        cfg.plan.replicated_tensor_sharding = False
    _set(problem, cfg, "plan.precision", "16.16")
    _set(problem, cfg, "plan.prefetch_depth", max(cfg.plan.prefetch_depth, 3))
    _set(problem, cfg, "plan.eight_bit_io", problem.profile.input_kind == "image")
    _set(problem, cfg, "plan.async_dataloader", True)
    _set(problem, cfg, "plan.dataloader_workers", max(cfg.plan.dataloader_workers, _WORKERS))
    _set(problem, cfg, "plan.gradient_accumulation",
         max(cfg.plan.gradient_accumulation, 4 * stages))
    _set(problem, cfg, "plan.device_iterations", max(cfg.plan.device_iterations, 4))
    spec = codec.knobs.get("plan.io_tiles")
    if spec is not None:
        choices = tuple(spec.choices) if spec.choices else (0,)
        # I/O tiles pay only where they hide a stream copy: a stream (not synthetic data) into
        # a program of one stage (the simulator's `io_overlaps`); elsewhere they only take
        # tiles from compute, so the fewest the space allows.
        overlaps = stages == 1 and problem.profile.input_source != "synthetic"
        _set(problem, cfg, "plan.io_tiles", io_tiles_rule(
            cfg, problem.profile.input_elements, problem.system.ipu.sram_bytes_per_tile, choices)
            if overlaps else min(choices))
    if stages > 1 and (codec.split_search is None
                       or len(cfg.plan.pipeline.splits) + 1 != stages):
        cfg.plan.pipeline.splits = codec.decode({R_PARAM: replicas}).config.plan.pipeline.splits
    return balanced_config(problem, cfg)


def _memory_savers(problem: SearchProblem) -> EvalConfig:
    cfg = copy.deepcopy(problem.codec.base)
    _set(problem, cfg, "plan.precision", "16.16")
    _set(problem, cfg, "plan.recompute", "checkpoints")
    _set(problem, cfg, "plan.offload_optimizer_state", True)
    if cfg.plan.pipeline.splits:
        _set(problem, cfg, "plan.pipeline.schedule", "interleaved")
    return balanced_config(problem, cfg)


_BALANCED = "balanced"
_SHARDED = ("plan.pipeline.schedule", "sharded")


def _memory_moves(problem: SearchProblem, cfg: EvalConfig) -> list[tuple[str, Any]]:
    """Single changes that save memory (seed session's list: FP16 first, recomputation,
    available memory proportion, offloading; seed guide 4.2 schedules), searched ones only."""
    amp_spec = problem.codec.knobs.get("plan.available_memory_proportion")
    moves: list[tuple[str, Any]] = [
        ("plan.precision", "16.16"),
        ("plan.precision", "16.32"),
        ("plan.recompute", "checkpoints"),
        ("plan.recompute", "every_block"),
        ("plan.offload_optimizer_state", True),
    ]
    if cfg.plan.replication_factor >= 2:
        moves.append(("plan.replicated_tensor_sharding", True))
    if cfg.plan.pipeline.splits:
        moves += [("plan.pipeline.schedule", "interleaved"), _SHARDED,
                  ("plan.pipeline.splits", _BALANCED)]
    if amp_spec is not None and amp_spec.is_range and amp_spec.low is not None:
        moves.append(("plan.available_memory_proportion",
                      max(amp_spec.low, cfg.plan.available_memory_proportion / 2)))
    spec_ok = problem.codec.split_search is not None
    return [(k, v) for k, v in moves
            if (_allowed(problem, k, v) or (k == "plan.pipeline.splits" and spec_ok))
            and get_key(cfg, k) != v]


def _apply(problem: SearchProblem, cfg: EvalConfig, moves: Sequence[tuple[str, Any]],
           rebalance: bool = False) -> EvalConfig:
    """`cfg` with `moves`; the split is re-balanced when asked or when a move says so."""
    out = copy.deepcopy(cfg)
    for key, value in moves:
        if key != "plan.pipeline.splits":
            set_key(out, key, value)
    if rebalance or any(key == "plan.pipeline.splits" for key, _ in moves):
        out = balanced_config(problem, out)
    return out


def _score(problem: SearchProblem, cfg: EvalConfig) -> tuple[bool, float]:
    """Larger is better: fitting plans by throughput, the others by how close they come."""
    try:
        result = problem.simulate(cfg)
    except IpuTuneError:
        return (False, -math.inf)
    return (True, result.throughput) if result.fits else (False, -memory_constraint(result))


def make_fit(problem: SearchProblem, cfg: EvalConfig) -> EvalConfig:
    """Greedily add memory-saving changes to `cfg` until the simulator says it fits.

    Each step takes the fastest change that fits, else the one that comes closest, and
    re-balances the split for it. Changes come in tiers: the savers that keep the training as
    it is, then a halved micro-batch (the first memory knob on the IPU, searched at or below
    the user's), then the sharded schedule (nothing pipelined: one IPU at work at a time), which
    saves the most stash and so, taken early as "the closest", would lead away from the
    pipelined plans that fit.
    """
    current, score = cfg, _score(problem, cfg)
    for tier in range(3):
        while not score[0]:
            options = [m for m in _memory_moves(problem, current)
                       if m[0] != "plan.pipeline.splits" and (tier == 2 or m != _SHARDED)]
            mb = current.workload.micro_batch_size
            if tier >= 1 and mb > 1 and _allowed(problem, "workload.micro_batch_size", mb // 2):
                options.append(("workload.micro_batch_size", mb // 2))
            if not options:
                break
            scored = [(_score(problem, c), c)
                      for c in (_apply(problem, current, [m], rebalance=True) for m in options)]
            best_score, best_cfg = max(scored, key=lambda sc: sc[0])
            if best_score <= score:
                break
            current, score = best_cfg, best_score
    return current


def largest_fitting_micro_batch(problem: SearchProblem, cfg: EvalConfig) -> EvalConfig | None:
    """`cfg` at the largest searched micro-batch below its own that fits on its split (memory
    grows with the micro-batch: a bisection), then re-balanced when that still fits; None when
    `cfg` fits already or no micro-batch does.
    What an engineer tries first on the IPU (seed hands-on: a smaller batch), keeping every
    other knob of the plan as it is."""
    spec = _spec(problem, "workload.micro_batch_size")
    mb = cfg.workload.micro_batch_size
    if spec is None or not spec.is_range or _score(problem, cfg)[0]:
        return None

    def at(m: int) -> EvalConfig:
        out = copy.deepcopy(cfg)
        out.workload.micro_batch_size = m
        return out

    lo, hi = int(spec.low or 1), mb - 1  # the answer lies in lo..hi, if anywhere
    if hi < lo or not _score(problem, at(lo))[0]:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _score(problem, at(mid))[0] else (lo, mid - 1)
    balanced = balanced_config(problem, at(lo))
    return balanced if _score(problem, balanced)[0] else at(lo)


def fewest_changes(problem: SearchProblem, cfg: EvalConfig, max_changes: int = 3,
                   keep: int = 3) -> list[EvalConfig]:
    """Fitting plans with the fewest memory-saving changes to `cfg`, fastest first.

    Breadth-first over sets of up to `max_changes` moves (one value per knob); the simulator
    is cheap enough to try them all.
    """
    moves = _memory_moves(problem, cfg)
    for size in range(1, max_changes + 1):
        found = []
        for combo in itertools.combinations(moves, size):
            if len({k for k, _ in combo}) < size:
                continue
            out = _apply(problem, cfg, combo)
            fits, rate = _score(problem, out)
            if fits:
                found.append((rate, out))
        if found:
            found.sort(key=lambda rc: -rc[0])
            return [c for _, c in found[:keep]]
    return []


def warm_start_plans(problem: SearchProblem) -> list[WarmPlan]:
    codec = problem.codec
    plans: list[tuple[str, EvalConfig, bool]] = []
    user_params = codec.encode(codec.base, exact=True)
    user = codec.decode(user_params).config if user_params is not None else None
    if user is not None:
        plans.append(("user", user, True))
    start = user if user is not None else codec.decode({}).config
    balanced = balanced_config(problem, start)
    plans.append(("balanced", balanced, False))
    smaller = largest_fitting_micro_batch(problem, balanced)
    if smaller is not None:
        plans.append((f"balanced, micro-batch {smaller.workload.micro_batch_size}", smaller, False))
    if "changes" in problem.objective_names:
        for key, value in _memory_moves(problem, start):
            plans.append((f"one change: {key}", _apply(problem, start, [(key, value)]), False))
        for cfg in fewest_changes(problem, start):
            plans.append(("fewest changes", cfg, False))
    first_r = start.plan.replication_factor
    for r in sorted(codec.r_options, key=lambda r: (r != first_r, r)):
        interrupts.check()  # each plans a split: seconds on a deep model
        plans.append((f"rules of thumb, {codec.stages_of(r)} stages",
                      make_fit(problem, _rules_of_thumb(problem, r)), False))
    plans.append(("memory savers", _memory_savers(problem), False))

    out: list[WarmPlan] = []
    for label, cfg, exact in plans:
        params = codec.encode(cfg, exact=exact)
        if params is None:
            continue
        decoded = codec.decode(params).config
        try:
            problem.simulate(decoded)
        except IpuTuneError:
            continue  # only plans the simulator accepts are worth a trial
        out.append(WarmPlan(label, decoded, params))
    return out
