"""Per weight update: optimizer update, gradient collectives across replicas, and offloaded
optimizer-state traffic (phases `weight_update`, `all_reduce_pod`, `all_reduce_gw`,
`streaming_memory`).

Placement (`ReplicaLayout`): a replica's pipeline stages sit on neighbouring IPUs, replicas one
after another, so IPU-Machines (4 IPUs) fill first, then the IPU-Link domain (POD, up to 64
IPUs), then further PODs (`ipu_tune.hardware.MachineSpec`).

Collectives of one stage's gradients across replicas (seed guide 4.3.1, Fig 4.3), hierarchical
as the IPU-Fabric is: reduce-scatter inside the IPU-Machine, then across the machines of the POD
(IPU-Links), all-reduce of each IPU's shard across PODs over the GW-Links, then all-gather back
the same way. A ring tier of k members moves 2(k-1)/k of what enters it per IPU; each tier
works on the shard the tier below left (bytes / IPUs below).

Terms, each with its source (`ALL_REDUCE_TERMS`; the seconds of each are in the result's
`extras["all_reduce_terms"]`):
- buffers: the gradients are merged into buffers of `all_reduce_buffer_bytes` (read: the MLPerf
  ResNet-50 TF1 configs set `max_cross_replica_buffer_size: 52428800`, 50 MB; PopART's
  `replicatedCollectivesSettings.mergeAllReduceCollectives` does the same), so the per-step
  latencies are paid per buffer, not per gradient tensor.
- ring bandwidth: a ring hop uses `ring_links_per_hop` IPU-Links (estimate: the ladder of an
  IPU-POD joins an IPU to each neighbour by 2 links; a ring does not get all 10), each at
  128 Gbit/s = 16 GB/s per direction (read: poplibs' cost model, lib/poplibs_test/Util.cpp;
  consistent with the 320 GB/s of an IPU's 10 links counted in both directions), at poplibs'
  link efficiency 0.85 (read: same file).
- sync: every ring step ends in a sync of 15 ns per hop counted twice (read: poplibs' cost
  model) over the hops across the tier (1 inside a machine; a ring of machines is machines/2
  hops across).
- GW-Links: the machine's 2 x 100 GbE (derived 25 GB/s) shared by its IPUs, and a GW-Link step
  latency per ring step (estimate: a RoCE round trip through the gateways, ~10 us; no public
  figure).

Replicated tensor sharding does the reduce-scatter half, updates its shard, and all-gathers the
updated weights the same way (seed guide 4.7, ZeRO), adding the gather/scatter compute sets.
Offloaded optimizer state is read and written over the streaming-memory path at every weight
update (seed guide 4.4.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ipu_tune.hardware import IpuSpec, System
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._constants import OPTIMIZER_STATE, SimConstants, state_bytes_per_param
from ipu_tune.simulator._stages import StageShape

__all__ = [
    "ALL_REDUCE_TERMS",
    "ALL_REDUCE_TERM_PARTS",
    "SINGLE",
    "ReplicaLayout",
    "UpdateTimes",
    "link_hop_bytes_per_s",
    "merged_buffers",
    "replica_layout",
    "update_times",
]


@dataclass(frozen=True)
class ReplicaLayout:
    """Where one stage's replicas sit: the members of each ring tier and the sync hops."""

    in_machine: int  # replicas of a ring inside one IPU-Machine
    machines: int  # machines a POD's ring spans
    pods: int  # IPU-Link domains (PODs) spanned, joined by GW-Links
    machine_hops: int  # sync hops across the ring of machines

    @property
    def ring_steps(self) -> int:
        """Steps of one all-reduce through the tiers: a ring of k members takes k-1 steps to
        reduce-scatter and k-1 to all-gather (seed guide 4.3.1, Fig 4.3)."""
        return 2 * (self.in_machine - 1) + 2 * (self.machines - 1) + 2 * (self.pods - 1)


SINGLE = ReplicaLayout(1, 1, 1, 0)


def replica_layout(system: System, plan: ExecutionPlan) -> ReplicaLayout:
    m = system.machine
    n = plan.stages
    r = plan.replication_factor
    in_machine = max(1, min(r, m.ipus_per_machine // n))
    per_pod = max(1, min(r, m.ipu_link_domain_ipus // n))
    machines = max(1, per_pod // in_machine)
    pods = max(1, -(-r // per_pod))
    return ReplicaLayout(in_machine, machines, pods, machines // 2)


class UpdateTimes(NamedTuple):
    """Seconds per weight update; stages run theirs concurrently, so each is the slowest
    stage's."""

    weight_update_s: float = 0.0
    all_reduce_pod_s: float = 0.0
    all_reduce_gw_s: float = 0.0
    streaming_memory_s: float = 0.0
    rts_gather_s: float = 0.0
    pods: int = 1  # PODs the replicas span
    # Seconds of the slowest stage's collective by `ALL_REDUCE_TERMS` (name, seconds).
    terms: tuple[tuple[str, float], ...] = ()

    @property
    def total_s(self) -> float:
        return (self.weight_update_s + self.all_reduce_pod_s + self.all_reduce_gw_s
                + self.streaming_memory_s)


NO_UPDATE = UpdateTimes()


def update_times(
    shapes: Sequence[StageShape], system: System, plan: ExecutionPlan, c: SimConstants
) -> UpdateTimes:
    if not plan.training:
        return NO_UPDATE
    replicated = plan.replication_factor > 1
    layout = replica_layout(system, plan) if replicated else SINGLE
    wu = pod = gw = sm = rts = 0.0
    terms: dict[str, float] = {}
    for x in shapes:
        wu = max(wu, _weight_update_s(x, system, plan, c))
        if plan.offload_optimizer_state:
            sm = max(sm, _streaming_memory_s(x, system, plan))
        if replicated:
            p, g, gather, t = _all_reduce_s(x, system, plan, c, layout)
            if p + g > pod + gw:
                pod, gw, terms = p, g, t
            rts = max(rts, gather)
    return UpdateTimes(wu, pod, gw, sm, rts, layout.pods, tuple(terms.items()))


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


def _ring(members: int) -> float:
    """Share of the bytes entering a ring tier that each member sends, reduce-scatter plus
    all-gather: 2(k-1)/k."""
    return 2.0 * (members - 1) / members


# Where each collective term comes from (`explain` prints each term's seconds and share).
ALL_REDUCE_TERMS: dict[str, str] = {
    "pod_bandwidth_s": "IPU-Link rings: 2 links per hop (estimate) x 16 GB/s per link and "
                       "direction x 0.85 (poplibs cost model: 128 Gbit/s per link)",
    "pod_sync_s": "15 ns per hop counted twice per ring step (poplibs cost model), per buffer",
    "gw_bandwidth_s": "GW-Links: 2 x 100 GbE per machine (derived 25 GB/s) shared by its IPUs",
    "gw_latency_s": "10 us per GW-Link ring step (estimate: RoCE round trip), per buffer",
    "rts_sets_s": "RTS gather/scatter compute sets (fitted compute-set overhead)",
}

# Each term's phase (its seconds are part of that phase's) and its printed name, in ms.
ALL_REDUCE_TERM_PARTS: dict[str, tuple[str, str]] = {
    "pod_bandwidth_s": ("all_reduce_pod", "IPU-Link bandwidth"),
    "pod_sync_s": ("all_reduce_pod", "ring sync"),
    "gw_bandwidth_s": ("all_reduce_gw", "GW-Link bandwidth"),
    "gw_latency_s": ("all_reduce_gw", "GW-Link latency"),
    "rts_sets_s": ("all_reduce_pod", "RTS compute sets"),
}

def link_hop_bytes_per_s(ipu: IpuSpec, c: SimConstants) -> float:
    """Bandwidth from one IPU to a neighbour, per direction: the links joining them, not all
    ten, each at its IPU's figure (`IpuSpec.ipu_link_bytes_per_s`). A ring hop and a pipeline
    stage's copy to the next IPU both move at it."""
    return ipu.ipu_link_bytes_per_s * c.ring_links_per_hop * c.ipu_link_efficiency


def merged_buffers(params: float, param_ops: float, weight_bytes: float,
                   c: SimConstants) -> float:
    """The collectives of a stage's gradients: one per buffer of `all_reduce_buffer_bytes`
    they are merged into, at most one per gradient tensor (`param_ops`)."""
    grads = params * weight_bytes
    return min(max(1.0, param_ops), max(1.0, -(-grads // c.all_reduce_buffer_bytes)))


def _all_reduce_s(x: StageShape, system: System, plan: ExecutionPlan, c: SimConstants,
                  layout: ReplicaLayout) -> tuple[float, float, float, dict[str, float]]:
    """(inside-POD seconds, across-POD seconds, RTS weight all-gather seconds, seconds by
    `ALL_REDUCE_TERMS`) of the stage's gradients."""
    m = system.machine
    link_bw = link_hop_bytes_per_s(system.ipu, c)
    gw_bw = m.gw_link_bytes_per_s / m.ipus_per_machine  # the machine's GW-Links, per IPU
    grads = x.params * (2.0 if plan.model_fp16 else 4.0)
    a, k, pods = layout.in_machine, layout.machines, layout.pods
    buffers = merged_buffers(x.params, x.param_ops, 2.0 if plan.model_fp16 else 4.0, c)
    steps = 2 * (a - 1) + 2 * (k - 1) * max(1, layout.machine_hops)  # hop-weighted
    sync_hop = 2.0 * m.sync_latency_per_hop_s
    terms = {
        "pod_bandwidth_s": (_ring(a) * grads + _ring(k) * grads / a) / link_bw,
        "pod_sync_s": buffers * sync_hop * steps,
        "gw_bandwidth_s": _ring(pods) * grads / (a * k) / gw_bw if pods > 1 else 0.0,
        "gw_latency_s": buffers * 2 * (pods - 1) * m.gw_link_step_latency_s if pods > 1 else 0.0,
        "rts_sets_s": 0.0,
    }
    pod_s = terms["pod_bandwidth_s"] + terms["pod_sync_s"]
    gw_s = terms["gw_bandwidth_s"] + terms["gw_latency_s"]
    gather = 0.0
    if plan.replicated_tensor_sharding:
        gather = (pod_s + gw_s) / 2.0  # the all-gather half carries the updated weights
        terms["rts_sets_s"] = 2 * x.param_ops * c.compute_set_overhead_cycles / system.ipu.clock_hz
        pod_s += terms["rts_sets_s"]
    return pod_s, gw_s, gather, terms
