"""Host side: input bytes, stream copies to the IPU, the data pipeline of the host servers and
their PopRun instances, and the per-call cost.

Sources: seed guide 4.4 (prefetch depth hides host latency, 3 usually optimal; I/O tiles
overlap the stream copy with compute only for single-IPU or grouped-pipeline programs; 8-bit or
fp16 transfers cut the bytes), 4.3.2 (more host *processes* - PopRun instances sharing one
server's I/O - when preprocessing binds; more *hosts* when I/O binds too; Fig 4.5: each instance
runs its own host code and data pipeline), 4.5.3 (device iterations amortise the per-call
host-device interaction); the ResNet-101 hands-on (without 8-bit I/O the host converts and
normalises every element; the synchronous loader adds host and device time, the asynchronous
loader overlaps them).

Transfers: a per-transfer latency plus bytes over the narrowest bandwidth of the path, not one
efficiency: the PCIe link of the IPU (`IpuSpec.host_link_bytes_per_s`), the machine's host
ports shared by the replicas it feeds, the server's network shared by the replicas it feeds.
With a prefetch depth of 2 or more the network leg runs ahead of the device (hidden up to one
micro-batch slot) and the latency is hidden as the depth grows; the network must still carry a
call's bytes within the call (`io_call_s`). A PCIe card in its server (C600) has no network
leg: its PCIe link is the whole path.

Host overhead, split by what it is charged to (seed guide 4.5.3: looping over device iterations
avoids "the host-side overhead of starting and stopping" the device program):
- per call (`call_overhead_s`): starting and stopping one device program, by kind. Training:
  `call_overhead_s`, fitted on the seed's training traces (T = DI x T_step + T_call); it holds
  what a training call adds besides its steps. Inference: `infer_call_overhead_s`, an estimate
  (no public figure: a few host syncs over PCIe and the runtime's own run call).
- per step: the stream copies of its micro-batches (`stream_copy_s`: latency + bytes), in the
  device step, with the pipeline ramp and the weight update of a training step.
- per sample: the data pipeline (`host_seconds_per_sample`), zero for an input no pipeline
  makes (`input_source` generated or synthetic); synthetic input has no stream copies either.
"""

from __future__ import annotations

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._constants import SimConstants

__all__ = [
    "call_overhead_s",
    "cpu_call_s",
    "host_instances",
    "host_seconds_per_sample",
    "input_bytes_per_sample",
    "io_call_s",
    "io_overlaps",
    "stream_copy_s",
]


def input_bytes_per_sample(profile: ModelProfile, plan: ExecutionPlan) -> float:
    """Bytes one sample occupies on the host-to-IPU stream."""
    if profile.input_kind == "tokens":
        # Every input tensor of a sample as stored (ids, masks, segment ids: int32), the
        # dataset's `sample_bytes`; the ids alone when a profile has none.
        return float(profile.sample_bytes) or 4.0 * profile.input_elements
    # The token ids paired with the main input (int32): a speech-seq2seq model's decoder ids,
    # an image-text model's caption.
    paired = 4.0 * profile.paired_tokens
    if profile.input_kind == "audio":
        # Samples or features in the stream's float type (no 8-bit form: they are not bytes).
        per_element = 2.0 if plan.input_fp16 else 4.0
        return per_element * profile.input_elements + paired
    if plan.eight_bit_io:
        return 1.0 * profile.input_elements + paired  # uint8 pixels; normalised on the IPU
    return (2.0 if plan.input_fp16 else 4.0) * profile.input_elements + paired


def host_instances(system: System, plan: ExecutionPlan) -> int:
    """PopRun instances actually run: at least one per server, at most one per replica."""
    return max(system.hosts, min(plan.host_instances, plan.replication_factor))


def _network_bytes_per_s(system: System, plan: ExecutionPlan) -> float:
    """Network bandwidth of one replica's input while every replica loads at once: the
    machine's host ports shared by the replicas whose first IPU it holds, the server's network
    shared by the replicas it feeds."""
    if system.machine.in_server:
        return system.ipu.host_link_bytes_per_s
    r = plan.replication_factor
    per_machine = max(1, min(r, system.machine.ipus_per_machine // plan.stages))
    per_server = max(1.0, r / system.hosts)
    return min(system.machine.host_port_bytes_per_s / per_machine,
               system.host.network_bytes_per_s / per_server)


def stream_copy_s(
    bytes_per_micro_batch: float, system: System, plan: ExecutionPlan, c: SimConstants,
    slot_s: float,
) -> float:
    """Device seconds one micro-batch's stream copy takes: the exposed share of the transfer
    latency (depth 1 exposes it, 2 half, 3 or more hides it) plus the bytes over the narrowest
    bandwidth of the path; prefetched (depth 2 or more), the network leg runs ahead during the
    previous micro-batch's slot `slot_s` and only its excess shows (seed guide 4.4.1). With
    I/O tiles the whole copy already overlaps the slot (`io_overlaps`): the caller passes no
    slot here, or the same slot would hide the network leg twice and a faster device would
    expose more of it."""
    exposed = max(0.0, 1.0 - (plan.prefetch_depth - 1) / 2.0)
    pcie, network = _copy_legs(bytes_per_micro_batch, system, plan)
    if plan.prefetch_depth > 1:
        network -= slot_s
    return c.stream_latency_s * exposed + max(pcie, network)


def first_copy_s(bytes_per_micro_batch: float, system: System, plan: ExecutionPlan,
                 c: SimConstants) -> float:
    """Seconds a call's first stream copy takes: nothing before it runs ahead, so neither its
    transfer latency nor its network leg is hidden, whatever the prefetch depth."""
    return c.stream_latency_s + max(_copy_legs(bytes_per_micro_batch, system, plan))


def _copy_legs(bytes_per_micro_batch: float, system: System,
               plan: ExecutionPlan) -> tuple[float, float]:
    """Seconds of a micro-batch's copy over the IPU's PCIe link and over the servers' network
    share of its replica."""
    return (bytes_per_micro_batch / system.ipu.host_link_bytes_per_s,
            bytes_per_micro_batch / _network_bytes_per_s(system, plan))


def io_call_s(bytes_per_call: float, system: System) -> float:
    """Seconds the servers' networks need to carry one call's input bytes (none for a card in
    its server: its PCIe copies are the stream copies of the device steps)."""
    if system.machine.in_server:
        return 0.0
    return bytes_per_call / (system.hosts * system.host.network_bytes_per_s)


def io_overlaps(plan: ExecutionPlan) -> bool:
    """I/O tiles overlap transfers with compute only for a program of one stage. The seed
    guide (4.4.2, SDK 2.3 onward) also allows a grouped pipeline, which TensorFlow runs, but
    PopTorch refuses overlapped I/O with PipelinedExecution (Compiler.cpp
    verifySettingsForOverlappedIO) and PopART follows it: a pipelined plan's I/O tiles hold
    the streams and take tiles from compute without hiding the copies."""
    return plan.io_tiles > 0 and plan.stages == 1


def host_seconds_per_sample(
    profile: ModelProfile, system: System, plan: ExecutionPlan, c: SimConstants
) -> float:
    """Host time of one sample on one worker: load/augment, then dtype conversion and
    normalisation unless 8-bit I/O moves them onto the IPU (seed hands-on "8-bit I/O"; audio
    samples and features are converted always); none
    for an input no data pipeline makes (generated in the stream's type, or synthetic)."""
    if profile.input_source != "dataset":
        return 0.0
    pre = profile.preprocess_s_per_sample
    if pre is None:
        pre = system.host.preprocess_s_per_sample
    if pre is None:
        pre = c.preprocess_s_per_sample
    convert = 0.0
    # Floats converted on the host: pixels without 8-bit I/O, and audio, which has none.
    if (profile.input_kind == "image" and not plan.eight_bit_io) or profile.input_kind == "audio":
        per_el = system.host.convert_s_per_element
        convert = (c.convert_s_per_element if per_el is None else per_el) * profile.input_elements
    return pre + convert


def cpu_call_s(samples_per_call: float, per_sample_s: float, system: System,
               plan: ExecutionPlan) -> float:
    """Host seconds of one call's data pipeline. The instances of a server run at once, each
    its own loader with `dataloader_workers` workers; each instance's main process (its own
    per-call work: the model call, stream callbacks, collation) holds one core, and the
    workers share the server's other cores."""
    per_server = host_instances(system, plan) // system.hosts
    cores = system.host.cpu_cores
    parallel = min(per_server * plan.dataloader_workers,
                   max(cores - per_server, cores / 2.0))
    return (samples_per_call / system.hosts) * per_sample_s / parallel


def call_overhead_s(system: System, plan: ExecutionPlan, c: SimConstants) -> float:
    """Device seconds one model call costs besides its steps: the host's own figure if it
    gives one, else the training or the inference constant (module docstring)."""
    value = system.host.call_overhead_s
    if value is not None:
        return value
    return c.call_overhead_s if plan.training else c.infer_call_overhead_s
