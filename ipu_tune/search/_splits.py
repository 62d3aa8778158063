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
                        plan.training, DEFAULT_CONSTANTS, plan.partials == "half")

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
        blocks = self.profile.block_stats[first:last]
        return self._memory(
            first,
            params=sum(b.parameters for b in blocks),
            saved=sum(b.saved_elements for b in blocks),
            saved_max=max((b.saved_elements for b in blocks), default=0),
            inner_outputs=sum(b.output_elements for b in blocks[:-1]),
            live_max=max((b.max_live_elements for b in blocks), default=0),
            depth=_stash_depth(self.plan, stage, stages),
        )

    def _memory(self, first: int, *, params: int, saved: int, saved_max: int,
                inner_outputs: int, live_max: int, depth: int) -> float:
        p = self.plan
        act = 2 if p.model_fp16 else 4
        per_param = float(act)  # weights
        if p.training:
            per_param += act  # gradient accumulator
            # The simulator's optimizer-state rule (moments, fp32 second moment).
            state_bytes = state_bytes_per_param(p.optimizer, p.model_fp16)
            if p.offload_optimizer_state:
                state_bytes = 0
            elif p.replicated_tensor_sharding and p.replication_factor > 1:
                state_bytes = state_bytes / p.replication_factor
            per_param += state_bytes
        if not p.training:
            stash = 0
        elif p.recompute == "none":
            stash = saved * depth
        else:
            first_in = (self.profile.input_elements if first == 0
                        else self.profile.block_stats[first - 1].output_elements)
            # Checkpoints stash only the stage input, every_block also each block's output;
            # one block's activations are recomputed live during backward.
            kept = first_in + (inner_outputs if p.recompute == "every_block" else 0)
            stash = kept * depth + saved_max
        return params * per_param + (stash + live_max) * p.micro_batch_size * act


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
    prefix = [0.0]
    for b in range(n):
        prefix.append(prefix[-1] + model.block_time(b))

    inf = float("inf")
    # best[k][j]: (over-memory ratio, slowest stage time) of blocks [0, j) on stages 0..k-1;
    # feasible splits (ratio 0) first, then the fastest.
    best = [[(inf, inf)] * (n + 1) for _ in range(stages + 1)]
    choice = [[-1] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = (0.0, 0.0)
    blocks = model.profile.block_stats
    for k in range(1, stages + 1):
        depth = _stash_depth(model.plan, k - 1, stages)
        # Stage k-1 covers blocks [i, j); later stages need at least one block each.
        for j in range(k, n - (stages - k) + 1):
            params = saved = saved_max = inner = live_max = 0
            for i in range(j - 1, k - 2, -1):  # grow the stage backwards from block j-1
                blk = blocks[i]
                params += blk.parameters
                saved += blk.saved_elements
                saved_max = max(saved_max, blk.saved_elements)
                live_max = max(live_max, blk.max_live_elements)
                if i < j - 1:
                    inner += blk.output_elements
                prev = best[k - 1][i]
                if prev[0] == inf:
                    continue
                mem = model._memory(i, params=params, saved=saved, saved_max=saved_max,
                                    inner_outputs=inner, live_max=live_max, depth=depth)
                over = max(0.0, (mem + offsets[k - 1]) / limit_bytes - 1.0)
                cand = (max(prev[0], over), max(prev[1], prefix[j] - prefix[i]))
                if cand < best[k][j]:
                    best[k][j] = cand
                    choice[k][j] = i
    starts = []
    j = n
    for k in range(stages, 0, -1):
        i = choice[k][j]
        assert i >= 0
        starts.append(i)
        j = i
    return tuple(reversed(starts))
