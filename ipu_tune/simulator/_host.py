"""Host side: input bytes, stream copies to the IPU, the data pipeline and the per-call cost.

Sources: seed guide 4.4 (prefetch depth hides host latency, 3 usually optimal; I/O tiles
overlap the stream copy with compute only for single-IPU or grouped-pipeline programs; 8-bit or
fp16 transfers cut the bytes), 4.3.2 (host bandwidth and preprocessing shared by the replicas a
host feeds), 4.5.3 (device iterations amortise the per-call host-device interaction); the
ResNet-101 hands-on (without 8-bit I/O the host converts and normalises every element; the
synchronous loader adds host and device time, the asynchronous loader overlaps them).
"""

from __future__ import annotations

import math

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._constants import SimConstants

__all__ = [
    "call_overhead_s",
    "host_seconds_per_sample",
    "input_bytes_per_sample",
    "io_overlaps",
    "stream_copy_s",
]


def input_bytes_per_sample(profile: ModelProfile, plan: ExecutionPlan) -> float:
    """Bytes one sample occupies on the host-to-IPU stream."""
    if profile.input_kind != "image":
        return 4.0 * profile.input_elements  # token ids as int32
    if plan.eight_bit_io:
        return 1.0 * profile.input_elements  # uint8 pixels; normalised on the IPU
    return (2.0 if plan.input_fp16 else 4.0) * profile.input_elements


def stream_copy_s(
    bytes_per_micro_batch: float, system: System, plan: ExecutionPlan, c: SimConstants
) -> float:
    """Seconds one micro-batch's stream copy takes, host latency included where the prefetch
    depth does not hide it (depth 1 exposes it, 2 half, 3 or more hides it; seed guide 4.4.1)."""
    replicas_per_host = math.ceil(plan.replication_factor / system.hosts)
    link = min(system.ipu.host_link_bytes_per_s,
               system.host.host_to_ipu_bytes_per_s / replicas_per_host)
    exposed = max(0.0, 1.0 - (plan.prefetch_depth - 1) / 2.0)
    return bytes_per_micro_batch / (link * c.host_link_efficiency) + c.stream_latency_s * exposed


def io_overlaps(plan: ExecutionPlan) -> bool:
    """I/O tiles overlap transfers with compute only for a single-IPU program or a grouped
    pipeline (seed guide 4.4.2, SDK 2.3 onward)."""
    return plan.io_tiles > 0 and (plan.stages == 1 or plan.schedule == "grouped")


def host_seconds_per_sample(
    profile: ModelProfile, system: System, plan: ExecutionPlan, c: SimConstants
) -> float:
    """Host time of one sample on one worker: load/augment, then dtype conversion and
    normalisation unless 8-bit I/O moves them onto the IPU (seed hands-on "8-bit I/O")."""
    pre = profile.preprocess_s_per_sample
    if pre is None:
        pre = system.host.preprocess_s_per_sample
    if pre is None:
        pre = c.preprocess_s_per_sample
    convert = 0.0
    if profile.input_kind == "image" and not plan.eight_bit_io:
        per_el = system.host.convert_s_per_element
        convert = (c.convert_s_per_element if per_el is None else per_el) * profile.input_elements
    return pre + convert


def call_overhead_s(system: System, c: SimConstants) -> float:
    value = system.host.call_overhead_s
    return c.call_overhead_s if value is None else value


def workers_per_host(system: System, plan: ExecutionPlan) -> int:
    """Loader workers that run at full speed on one host (up to its cores)."""
    return max(1, min(plan.dataloader_workers, system.host.max_workers))
