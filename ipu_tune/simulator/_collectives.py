"""Per weight update: optimizer update, gradient collectives across replicas, and offloaded
optimizer-state traffic (the `weight_update`, `all_reduce` and `streaming_memory` phases).

Collectives: ring all-reduce of the gradients over IPU-Links, 2(r-1)/r x bytes per IPU
(seed guide 4.3.1, Fig 4.3); replicated tensor sharding reduce-scatters the gradients and
all-gathers the updated weights ((r-1)/r x bytes each, seed guide 4.7, ZeRO) and adds the
gather/scatter compute sets. Offloaded optimizer state is read and written over the
streaming-memory path at every weight update (seed guide 4.4.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ipu_tune.hardware import System
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._constants import OPTIMIZER_STATE, SimConstants, state_bytes_per_param
from ipu_tune.simulator._stages import StageShape

__all__ = ["UpdateTimes", "update_times"]


@dataclass(frozen=True)
class UpdateTimes:
    """Seconds per weight update; stages run theirs concurrently, so each is the slowest
    stage's."""

    weight_update_s: float = 0.0
    all_reduce_s: float = 0.0
    streaming_memory_s: float = 0.0
    rts_gather_s: float = 0.0


NO_UPDATE = UpdateTimes()


def update_times(
    shapes: Sequence[StageShape], system: System, plan: ExecutionPlan, c: SimConstants
) -> UpdateTimes:
    if not plan.training:
        return NO_UPDATE
    wu = ar = sm = rts = 0.0
    for x in shapes:
        wu = max(wu, _weight_update_s(x, system, plan, c))
        sm = max(sm, _streaming_memory_s(x, system, plan))
        coll, gather = _all_reduce_s(x, system, plan, c)
        ar, rts = max(ar, coll), max(rts, gather)
    return UpdateTimes(wu, ar, sm, rts)


def _weight_update_s(x: StageShape, system: System, plan: ExecutionPlan,
                     c: SimConstants) -> float:
    """Optimizer update of the stage's (shard of the) parameters: each state touched once by
    a fused vertex, plus one compute set per parameter tensor."""
    ipu = system.ipu
    shard = plan.replication_factor if plan.replicated_tensor_sharding else 1
    moments = OPTIMIZER_STATE[plan.optimizer].moments
    touched = (x.params / shard) * (2 + moments + (1 if plan.gradient_accumulation > 1 else 0))
    compute_tiles = ipu.tiles - plan.io_tiles
    return (touched * c.weight_update_cycles_per_element / compute_tiles
            + x.param_ops * c.compute_set_overhead_cycles) / ipu.clock_hz


def _streaming_memory_s(x: StageShape, system: System, plan: ExecutionPlan) -> float:
    if not plan.offload_optimizer_state:
        return 0.0
    shard = plan.replication_factor if plan.replicated_tensor_sharding else 1
    state = x.params / shard * state_bytes_per_param(plan.optimizer, plan.model_fp16)
    return 2.0 * state / system.ipu.streaming_memory_bytes_per_s


def _all_reduce_s(x: StageShape, system: System, plan: ExecutionPlan,
                  c: SimConstants) -> tuple[float, float]:
    """(collective seconds, of which the RTS weight all-gather) for the stage's gradients."""
    r = plan.replication_factor
    if r <= 1:
        return 0.0, 0.0
    ipu = system.ipu
    wb = 2.0 if plan.model_fp16 else 4.0
    link_bw = ipu.ipu_link_bytes_per_s * c.ipu_link_efficiency
    grad_bytes = x.params * wb
    ring = (r - 1) / r
    gather = 0.0
    if plan.replicated_tensor_sharding:
        gather = ring * x.params * wb / link_bw
        coll = ring * grad_bytes / link_bw + gather + (
            2 * x.param_ops * c.compute_set_overhead_cycles / ipu.clock_hz)
    else:
        coll = 2.0 * ring * grad_bytes / link_bw
    coll += 2 * (r - 1) * c.sync_latency_s
    return coll, gather
