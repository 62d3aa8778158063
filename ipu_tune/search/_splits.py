"""Pipeline splits: an encoding every sample of which is valid, and a balanced-split planner.

Encoding. With S stages the search draws S-1 integer *cuts* (Optuna params
``plan.pipeline.cut<i>of<S>``), each a block index in 1..n-1 where a stage may begin. The cuts
are sorted and pushed apart into strictly increasing block indices, so every draw is a valid
split, and neighbouring draws are neighbouring splits (the sampler can learn from them).

Planner. `balanced_split` is the dynamic programme of PipeDream's planner (Narayanan et al.,
"PipeDream: Generalized Pipeline Parallelism for DNN Training", SOSP 2019, section 3.1)
restricted to a straight pipeline: minimise the slowest stage's time subject to every stage
fitting in its IPU's memory. Stage time is the sum of the simulator's per-block cycles (the
profile's FLOPs when those are unavailable); stage memory is estimated from the profile with
the stash depths of the seed guide (4.2) and an additive per-stage offset that
`ipu_tune.search._warm` calibrates against the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    block_costs,
    stash_depth,
    state_bytes_per_param,
)

__all__ = [
    "StageCostModel",
    "balanced_split",
    "cut_param",
    "cuts_to_starts",
    "even_split",
    "simulator_block_cycles",
    "stage_loads",
]

def cut_param(index: int, stages: int) -> str:
    """Optuna parameter name of the `index`-th cut (1-based) of an S-stage pipeline."""
    return f"plan.pipeline.cut{index}of{stages}"


def cuts_to_starts(cuts: Sequence[int], n_blocks: int) -> tuple[int, ...]:
    """Stage start block indices (0 first) from any cuts: sorted, strictly increasing, in range."""
    stages = len(cuts) + 1
    assert 1 <= stages <= n_blocks, (stages, n_blocks)
    out = sorted(min(max(int(c), 1), n_blocks - 1) for c in cuts)
    for i in range(len(out)):  # push apart forwards ...
        out[i] = max(out[i], (out[i - 1] if i else 0) + 1)
    for i in reversed(range(len(out))):  # ... and back inside n_blocks from the end
        out[i] = min(out[i], (out[i + 1] if i + 1 < len(out) else n_blocks) - 1)
    return (0, *out)


def even_split(n_blocks: int, stages: int) -> tuple[int, ...]:
    """The naive split: the same number of blocks on every stage."""
    return tuple(round(s * n_blocks / stages) for s in range(stages))


def _stash_depth(plan: ExecutionPlan, stage: int, stages: int) -> int:
    """Activations a stage keeps for backward: the simulator's rule (seed guide 4.2)."""
    return stash_depth(plan.schedule, stages, stage) if plan.training else 1


def simulator_block_cycles(profile: ModelProfile, system: System,
                           plan: ExecutionPlan) -> tuple[float, ...]:
    """Per-block cycles of one micro-batch as the simulator counts them.

    Forward + backward compute and exchange (+ the recomputed forward).
    """
    costs = block_costs(profile, system.ipu, plan.micro_batch_size, plan.model_fp16,
                        plan.available_memory_proportion, system.ipu.tiles - plan.io_tiles,
                        plan.training, DEFAULT_CONSTANTS, plan.partials == "half",
                        plan.embedding_serialization)

    def span(prefix: Sequence[float], b: int) -> float:
        return float(prefix[b + 1] - prefix[b])

    out = []
    for b in range(len(profile.block_stats)):
        fwd = span(costs.fwd_compute, b) + span(costs.fwd_exchange, b)
        bwd = (span(costs.bwd_compute, b) + span(costs.bwd_exchange, b)
               if plan.training else 0.0)
        # `auto` is pipeline recomputation here: the planner splits into stages.
        extra = fwd if plan.training and plan.recompute != "none" else 0.0
        out.append(fwd + bwd + extra)
    return tuple(out)


@dataclass(frozen=True)
class StageCostModel:
    """Per-block time weights and a memory estimate of any block range as a pipeline stage."""

    profile: ModelProfile
    plan: ExecutionPlan
    # Per-block time (any unit) from the simulator; None: the profile's FLOPs instead.
    block_times: tuple[float, ...] | None = None

    def block_time(self, b: int) -> float:
        """Time weight of block `b` per micro-batch: forward, backward, recomputation."""
        if self.block_times is not None:
            return self.block_times[b]
        blk = self.profile.block_stats[b]
        if not self.plan.training:
            return blk.forward_flops
        extra = blk.forward_flops if self.plan.recompute != "none" else 0.0
        return blk.forward_flops + blk.backward_flops + extra

    def stage_memory_bytes(self, first: int, last: int, stage: int, stages: int) -> float:
        """Estimated bytes of blocks [first, last) as stage `stage` of `stages` (no fixed costs)."""
        depth = _stash_depth(self.plan, stage, stages)
        return float(self.memory_matrix(depth)[first, last])

    def memory_matrix(self, depth: int) -> np.ndarray:
        """Estimated bytes of every block range [i, j) as a stage with stash `depth`, at
        [i, j] (i < j; other entries are meaningless): weights, gradient accumulators and
        optimizer state per parameter, the stash by recomputation mode, the largest live
        block's activations."""
        m = self._matrices
        act = 2 if self.plan.model_fp16 else 4
        stash = m.stash_per_depth * depth + m.stash_fixed
        out: np.ndarray = m.weights + (stash + m.live_max) * self.plan.micro_batch_size * act
        return out

    @cached_property
    def _matrices(self) -> _StageMatrices:
        return _StageMatrices.of(self.profile, self.plan)


@dataclass(frozen=True)
class _StageMatrices:
    """The parts of a stage's memory that do not depend on its stash depth, for every block
    range [i, j) at [i, j]: bytes per parameter x parameters, stash elements per unit of depth
    and fixed, the largest live block's elements."""

    weights: np.ndarray  # float bytes
    stash_per_depth: np.ndarray  # elements
    stash_fixed: np.ndarray  # elements
    live_max: np.ndarray  # elements

    @staticmethod
    def of(profile: ModelProfile, plan: ExecutionPlan) -> _StageMatrices:
        blocks = profile.block_stats
        n = len(blocks)

        def column(values: list[int]) -> np.ndarray:
            return np.array(values, dtype=np.int64)

        def ranged_sum(values: list[int]) -> np.ndarray:  # [i, j]: sum of values[i:j]
            prefix = np.concatenate([[0], np.cumsum(column(values))])
            return prefix[None, :] - prefix[:n, None]

        def ranged_max(values: list[int]) -> np.ndarray:  # [i, j]: max of values[i:j]
            upper = np.triu(np.broadcast_to(column(values), (n, n)))
            out = np.zeros((n, n + 1), dtype=np.int64)
            out[:, 1:] = np.maximum.accumulate(upper, axis=1)
            return out

        outputs = [b.output_elements for b in blocks]
        saved = [b.saved_elements for b in blocks]
        weights = ranged_sum([b.parameters for b in blocks]) * _bytes_per_param(plan)
        zeros = np.zeros((n, n + 1), dtype=np.int64)
        if not plan.training:
            per_depth, fixed = zeros, zeros
        elif plan.recompute == "none":
            per_depth, fixed = ranged_sum(saved), zeros
        else:
            # Checkpoints stash only the stage input, every_block also each block's output
            # but the last; one block's activations are recomputed live during backward.
            first_in = column([profile.input_elements, *outputs[:-1]])[:, None]
            per_depth = first_in + zeros
            if plan.recompute == "every_block":
                inner = ranged_sum(outputs)
                per_depth = per_depth + np.concatenate([zeros[:, :1], inner[:, :-1]], axis=1)
            fixed = ranged_max(saved)
        return _StageMatrices(weights, per_depth, fixed,
                              ranged_max([b.max_live_elements for b in blocks]))


def _bytes_per_param(plan: ExecutionPlan) -> float:
    """Weights, gradient accumulator and optimizer state (the simulator's rules: moments,
    fp32 second moment; none when offloaded, a replica's share when sharded)."""
    act = 2 if plan.model_fp16 else 4
    per_param = float(act)
    if plan.training:
        per_param += act
        state_bytes = state_bytes_per_param(plan.optimizer, plan.model_fp16)
        if plan.offload_optimizer_state:
            state_bytes = 0
        elif plan.replicated_tensor_sharding and plan.replication_factor > 1:
            state_bytes = state_bytes / plan.replication_factor
        per_param += state_bytes
    return per_param


def stage_loads(model: StageCostModel, starts: Sequence[int]) -> list[float]:
    """Time weight of every stage of a split (for balance comparisons)."""
    n = len(model.profile.block_stats)
    ends = [*starts[1:], n]
    return [sum(model.block_time(b) for b in range(s, e))
            for s, e in zip(starts, ends, strict=True)]


def balanced_split(
    model: StageCostModel,
    stages: int,
    limit_bytes: float,
    offsets_bytes: Sequence[float] | None = None,
) -> tuple[int, ...]:
    """Stage starts minimising the slowest stage with every stage's memory <= `limit_bytes`.

    `offsets_bytes[s]` is added to stage s's estimate (code, exchange, buffers: what the
    estimate leaves out). When no split fits, the split with the least memory excess is
    returned, so that the caller still gets the best chance of fitting.
    """
    n = len(model.profile.block_stats)
    assert 1 <= stages <= n
    offsets = list(offsets_bytes) if offsets_bytes is not None else [0.0] * stages
    prefix = np.concatenate([[0.0], np.cumsum([model.block_time(b) for b in range(n)])])
    stage_time = prefix[None, :] - prefix[:n, None]  # [i, j]: blocks [i, j) on one stage
    i_of = np.arange(n)[:, None]
    j_of = np.arange(n + 1)[None, :]

    inf = float("inf")
    # best_*[k, j]: (over-memory ratio, slowest stage time) of blocks [0, j) on stages
    # 0..k-1; feasible splits (ratio 0) first, then the fastest.
    best_over = np.full((stages + 1, n + 1), inf)
    best_time = np.full((stages + 1, n + 1), inf)
    choice = np.full((stages + 1, n + 1), -1, dtype=np.int64)
    best_over[0, 0] = best_time[0, 0] = 0.0
    for k in range(1, stages + 1):
        # Stage k-1 covers blocks [i, j); later stages need at least one block each.
        allowed = (i_of < j_of) & (j_of >= k) & (j_of <= n - (stages - k))
        allowed &= (best_over[k - 1, :n] != inf)[:, None]
        mem = model.memory_matrix(_stash_depth(model.plan, k - 1, stages))
        over = np.maximum(0.0, (mem + offsets[k - 1]) / limit_bytes - 1.0)
        cand_over = np.where(allowed, np.maximum(best_over[k - 1, :n, None], over), inf)
        cand_time = np.maximum(best_time[k - 1, :n, None], stage_time)
        # The least excess, then the fastest; of equals the largest i (a stage grown
        # backwards from block j-1 keeps the first it meets).
        least = cand_over.min(axis=0)
        low = (cand_over == least) & allowed
        fastest = np.where(low, cand_time, inf).min(axis=0)
        pick = low & (cand_time == fastest)
        found = pick.any(axis=0)
        last_i = n - 1 - np.argmax(pick[::-1], axis=0)
        best_over[k] = np.where(found, least, inf)
        best_time[k] = np.where(found, fastest, inf)
        choice[k] = np.where(found, last_i, -1)
    starts = []
    j = n
    for k in range(stages, 0, -1):
        i = int(choice[k, j])
        assert i >= 0
        starts.append(i)
        j = i
    return tuple(reversed(starts))

