"""Assembly: profile x system x plan -> SimResult (pure; caches are memoisation only).

Time of one weight-update step (train) or one micro-batch pass (infer), per replica, in named
steps:
  `_stages`      per-stage passes (`_pipeline.StageParts`) and each IPU's memory (`_memory`)
  `update_times` weight update, gradient collectives, streaming memory (`_collectives`)
  `_call_time`   device step = pipelined passes + exposed stream copies + the update;
                 device call = device iterations x device step + per-call cost;
                 call = host + device call (synchronous loader) or max of both (async)
  `_phases`      the step split by TIME_PHASES, and the bottleneck
Throughput = samples per call (all replicas) / call time; 0.0 when the plan does not fit. A
sample is one of the dataset's: with packed sequences a micro-batch of packs holds
`profile.sequences_per_pack` samples per pack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ipu_tune.simulator._host as _host
from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._collectives import UpdateTimes, link_hop_bytes_per_s, update_times
from ipu_tune.simulator._compute import BlockCosts, block_costs
from ipu_tune.simulator._constants import DEFAULT_CONSTANTS, SimConstants
from ipu_tune.simulator._memory import PlanMemory, plan_memory, stage_memory, stash_depth
from ipu_tune.simulator._pipeline import StageParts, StepCore, pipeline_step, stage_parts
from ipu_tune.simulator._result import IpuMemory, SimResult, StageTime, built, fullest
from ipu_tune.simulator._stages import StageShape, head_stage_count, stage_shapes

__all__ = ["simulate"]

MB = 1e6


def simulate(
    profile: ModelProfile,
    system: System,
    plan: ExecutionPlan,
    constants: SimConstants = DEFAULT_CONSTANTS,
) -> SimResult:
    """Simulate one plan. Raises `IpuTuneError` only for splits that are not blocks of the
    model; a plan that does not fit is a result with `fits=False` and the reason."""
    c = constants
    shapes = stage_shapes(profile, plan)
    pm = plan_memory(plan, system, c)  # the plan's derived facts, read once
    training = pm.training
    # Each stage's IPU at its own available memory proportion (one cost table per value).
    by_amp = {amp: block_costs(profile, system.ipu, plan.micro_batch_size, pm.model_fp16, amp,
                               pm.compute_tiles, training, c, plan.partials == "half",
                               plan.embedding_serialization)
              for amp in set(plan.stage_memory_proportions)}
    costs = [by_amp[amp] for amp in plan.stage_memory_proportions]
    mb_in_bytes = _host.input_bytes_per_sample(profile, plan) * plan.micro_batch_size
    # Synthetic data is made on the IPU (PopTorch enableSyntheticData): no stream, so no
    # stream buffers and nothing for I/O tiles to hold.
    stream_bytes = 0.0 if profile.input_source == "synthetic" else mb_in_bytes
    parts, memory, times, fits = _stages(shapes, costs, system, pm, c, stream_bytes)
    core = pipeline_step(parts, plan.schedule,
                         plan.gradient_accumulation if training else 1, training,
                         head_stage_count(shapes))
    update = update_times(shapes, system, plan, c)
    di = plan.device_iterations
    inputs_per_call = plan.samples_per_call  # model inputs: packs when sequences are packed
    call = _call_time(profile, system, plan, c, core, update, mb_in_bytes, inputs_per_call)
    # Rates count dataset samples: a pack of packed sequences is `sequences_per_pack` of them,
    # as Graphcore's packed BERT reports sequences/s (Krell et al. 2021).
    samples_per_step = plan.samples_per_step * profile.sequences_per_pack
    samples_per_call = samples_per_step * di
    phases = _phases(core, update, call, di)
    # Latency: a call's inputs on the host to its results on the host (`_call_time`). Host
    # preprocessing is not in it: the inputs are ready when the call starts.
    latency_s = call.device_call_s
    return built(SimResult, {
        "fits": fits,
        "throughput": samples_per_call / call.call_s if fits else 0.0,
        "step_time_s": call.call_s / di,
        "phases": phases,
        "bottleneck": _bottleneck(fits, plan, call, phases),
        "memory": tuple(memory),
        "stages": tuple(times),
        "reason": "" if fits else _reason(memory, stream_bytes, plan.io_tiles,
                                          c.io_tile_overhead),
        "samples_per_step": samples_per_step,
        "device_throughput": samples_per_call / call.device_call_s,
        "extras": _extras(system, plan, pm, parts, costs, update, call, samples_per_call),
        "latency_s": latency_s,
    })


def _stage_time(x: StageShape, p: StageParts) -> StageTime:
    """The reported times of one stage's micro-batch."""
    return built(StageTime, {
        "stage": x.stage,
        "blocks": (x.first_block, x.last_block),
        "forward_s": p.f_compute + p.f_exchange,
        "backward_s": p.b_compute + p.b_exchange,
        "recompute_s": p.r_compute + p.r_exchange,
        "inter_ipu_s": p.f_link + p.b_link,
        "inter_ipu_back_s": p.b_link,
        "also": (x.head_block,) if x.head_block else (),
    })


def _stages(
    shapes: tuple[StageShape, ...], costs: list[BlockCosts], system: System, pm: PlanMemory,
    c: SimConstants, mb_in_bytes: float,
) -> tuple[list[StageParts], list[IpuMemory], list[StageTime], bool]:
    """Each stage's passes of one micro-batch (`costs[s]`: the block costs at its IPU's
    available memory proportion), its IPU's memory, its reported times, and whether every IPU
    fits."""
    ipu, clock = system.ipu, system.ipu.clock_hz
    training, recompute = pm.training, pm.recompute != "none"
    wb, b = pm.wb, pm.b
    link_bw = link_hop_bytes_per_s(system.ipu, c)  # to the next IPU, as a ring hop
    sync_s = c.sync_latency_s
    limit, tile_limit = ipu.sram_bytes, ipu.sram_bytes_per_tile
    parts, memory, times = [], [], []
    fits = True
    for x in shapes:
        s, lo, hi, h0, h1 = x.stage, x.lo, x.hi, x.head_lo, x.head_hi
        k = costs[s]
        fc, fx, fs, temp = k.fwd_compute, k.fwd_exchange, k.fwd_sets, k.temp_block
        bc, bx, bs = k.bwd_compute, k.bwd_exchange, k.bwd_sets
        # Its blocks [lo, hi) and the tied head [h0, h1) it may also run (`_stages`).
        f_comp = (fc[hi] - fc[lo] + fc[h1] - fc[h0]) / clock
        f_exch = (fx[hi] - fx[lo] + fx[h1] - fx[h0]) / clock
        send = (x.output_el * b * wb / link_bw + sync_s) if x.sends else 0.0
        sets = fs[hi] - fs[lo] + fs[h1] - fs[h0]
        if training:
            b_comp = (bc[hi] - bc[lo] + bc[h1] - bc[h0]) / clock
            b_exch = (bx[hi] - bx[lo] + bx[h1] - bx[h0]) / clock
            # Its input's gradient back; IPU0 with the tied head returns the encoder output's.
            back_el = x.input_el if s > 0 else (x.output_el if h1 > h0 else 0.0)
            back = (back_el * b * wb / link_bw + sync_s) if back_el else 0.0
            if recompute:
                p = stage_parts(f_comp, f_exch, send, b_comp, b_exch, back, f_comp, f_exch)
                sets += sets
            else:
                p = stage_parts(f_comp, f_exch, send, b_comp, b_exch, back)
            sets += bs[hi] - bs[lo] + bs[h1] - bs[h0]
        else:
            p = stage_parts(f_comp, f_exch, send)
        parts.append(p)
        times.append(_stage_time(x, p))
        cats, max_tile, total = stage_memory(
            x, pm,
            temp_bytes=max(temp[lo:hi] + temp[h0:h1]),
            compute_sets=sets,
            io_bytes_per_micro_batch=mb_in_bytes if s == 0 else 0.0,
        )
        # IpuMemory.fits, from the total already summed.
        fits = fits and total <= limit and max_tile <= tile_limit
        memory.append(built(IpuMemory, {
            "ipu": s, "stage": s, "categories": cats, "limit_bytes": limit,
            "max_tile_bytes": max_tile, "tile_limit_bytes": tile_limit,
        }))
    return parts, memory, times, fits


@dataclass(slots=True)
class CallTime:
    """Seconds of one model call (device iterations x steps) and its parts (slotted, not
    frozen, for the reasons of `_pipeline.StageParts`)."""

    call_s: float
    device_call_s: float
    host_call_s: float  # the data pipeline (CPU) or the network, whichever is slower
    host_exposed_s: float  # host time not overlapped with the device
    call_cost_s: float  # per-call device cost
    ramp_s: float  # pipeline ramp per step
    host_io_s: float  # exposed stream copies per step (a call's first one amortised)
    stream_copy_s: float  # one micro-batch's copy
    host_s_per_sample: float
    io_overlap: bool
    io_call_s: float  # the servers' network time of one call's input


def _call_time(
    profile: ModelProfile, system: System, plan: ExecutionPlan, c: SimConstants,
    core: StepCore, update: UpdateTimes, mb_in_bytes: float, samples: int,
) -> CallTime:
    """The call of `samples` samples (`plan.samples_per_call`)."""
    training = plan.training
    g = plan.gradient_accumulation if training else 1
    di = plan.device_iterations
    # Synthetic data is made on the IPU: no host-device stream (PopTorch enableSyntheticData).
    on_device = profile.input_source == "synthetic"
    overlap = _host.io_overlaps(plan)
    ahead_s = 0.0 if overlap else core.slot
    copy_s = 0.0 if on_device else _host.stream_copy_s(mb_in_bytes, system, plan, c, ahead_s)
    exposed_copy = max(0.0, copy_s - core.slot) if overlap else copy_s
    ramp = core.ramp if training else core.ramp / di
    host_io = g * exposed_copy
    device_step = core.compute + core.exchange + core.inter_ipu + ramp + host_io + update.total_s
    call_cost = _host.call_overhead_s(system, plan, c)
    # PopTorch and PopART return a call's outputs when it ends (seed guide 4.5.3) and take
    # the next call's inputs only then: a call's first stream copy has no earlier slot to
    # run in (neither prefetch nor I/O tiles hide it), so it is paid in full once per call.
    first_excess = 0.0 if on_device else (
        _host.first_copy_s(mb_in_bytes, system, plan, c) - exposed_copy)
    device_call = di * device_step + call_cost + first_excess
    per_sample = _host.host_seconds_per_sample(profile, system, plan, c)
    io_call = 0.0 if on_device else _host.io_call_s(mb_in_bytes * samples / plan.micro_batch_size,
                                                     system)
    host_call = max(_host.cpu_call_s(samples, per_sample, system, plan), io_call)
    if plan.async_dataloader or per_sample == 0.0:
        # A synchronous loader serialises its CPU work with the device; with none (generated
        # or synthetic data, or 8-bit I/O with nothing to load), only the network leg is left
        # and it streams during the call.
        call = max(host_call, device_call)
        host_exposed = max(0.0, host_call - device_call)
    else:
        call = host_call + device_call
        host_exposed = host_call
    return CallTime(call, device_call, host_call, host_exposed, call_cost, ramp,
                    host_io + first_excess / di, copy_s, per_sample, overlap, io_call)


def _phases(core: StepCore, update: UpdateTimes, call: CallTime, di: int) -> dict[str, float]:
    """Seconds per step by TIME_PHASES (host parts of the call amortised per step)."""
    return {
        "compute": core.compute,
        "exchange": core.exchange,
        "inter_ipu": core.inter_ipu,
        "pipeline_ramp": call.ramp_s,
        "weight_update": update.weight_update_s,
        "all_reduce_pod": update.all_reduce_pod_s,
        "all_reduce_gw": update.all_reduce_gw_s,
        "streaming_memory": update.streaming_memory_s,
        "host_io": call.host_io_s,
        "host_preprocess": call.host_exposed_s / di,
        "host_overhead": call.call_cost_s / di,
    }


def _bottleneck(fits: bool, plan: ExecutionPlan, call: CallTime,
                phases: dict[str, float]) -> str:
    if not fits:
        return "out_of_memory"
    if plan.async_dataloader and call.host_call_s > call.device_call_s:
        return "host_preprocess"
    return max(phases, key=phases.__getitem__)


def _extras(
    system: System, plan: ExecutionPlan, pm: PlanMemory,
    parts: list[StageParts], costs: list[BlockCosts],
    update: UpdateTimes, call: CallTime, samples_per_call: float,
) -> dict[str, Any]:
    n = pm.stages
    training = pm.training
    schedule = pm.schedule
    return {
        "device_call_s": call.device_call_s,
        "device_call_cycles": call.device_call_s * system.ipu.clock_hz,
        "host_call_s": call.host_call_s,
        "host_s_per_sample": call.host_s_per_sample,
        "samples_per_call": samples_per_call,
        "stream_copy_s": call.stream_copy_s,
        "io_overlap": call.io_overlap,
        "compute_tiles": system.ipu.tiles - plan.io_tiles,
        "stash_depths": ([stash_depth(schedule, n, s) for s in range(n)] if training
                         else [0] * n),
        "stage_slot_s": ([p.forward + p.backward for p in parts] if training  # StageParts.slot
                         else [p.forward for p in parts]),
        "amp_max_passes": max(k.max_passes for k in costs),
        "rts_gather_s": update.rts_gather_s,
        "all_reduce_terms": dict(update.terms),  # seconds by _collectives.ALL_REDUCE_TERMS
        "io_call_s": call.io_call_s,
        "host_instances": _host.host_instances(system, plan),
        "recompute": pm.recompute,  # recompute_mode(plan)
        "pods": -(-(plan.replication_factor * n) // system.machine.ipu_link_domain_ipus),
        "simulator_constants": "default" if pm.c is DEFAULT_CONSTANTS else "custom",
    }


def _reason(memory: list[IpuMemory], mb_in_bytes: float, io_tiles: int, io_overhead: float) -> str:
    """Why the plan does not fit, said of the fullest IPU (`fullest`: the one the headline's
    peak is) ("" when it fits)."""
    first = fullest(memory)
    if first is None:
        return ""
    others = len({m.ipu for m in memory if not m.fits}) - 1
    also = f"; {others} other IPU(s) over their limits too" if others > 0 else ""
    return _reason_of(first, mb_in_bytes, io_tiles, io_overhead) + also


def _reason_of(m: IpuMemory, mb_in_bytes: float, io_tiles: int, io_overhead: float) -> str:
    cats = m.categories
    largest = max(cats, key=cats.__getitem__)
    where = f"IPU{m.ipu} (stage {m.stage})"
    io_need = io_overhead * mb_in_bytes
    if io_tiles and m.stage == 0 and io_need > io_tiles * m.tile_limit_bytes:
        need = math.ceil(io_need / m.tile_limit_bytes)
        need = max(32, need + need % 2)
        hint = (f"use at least {need} I/O tiles" if need <= 192
                else "more than 192 I/O tiles would be needed: lower the micro-batch")
        return (
            f"{where}: io_tiles: {io_tiles} I/O tiles hold "
            f"{io_tiles * m.tile_limit_bytes / MB:.1f} MB, a micro-batch needs "
            f"{io_need / MB:.1f} MB (excess "
            f"{(io_need - io_tiles * m.tile_limit_bytes) / MB:.1f} MB); {hint}"
        )
    if m.total_bytes > m.limit_bytes:
        return (
            f"{where}: {m.total_bytes / MB:.1f} MB exceeds the {m.limit_bytes / MB:.1f} MB "
            f"of the IPU by {(m.total_bytes - m.limit_bytes) / MB:.1f} MB; largest category "
            f"{largest} ({cats[largest] / MB:.1f} MB)"
        )
    over = m.max_tile_bytes - m.tile_limit_bytes
    return (
        f"{where}: the most-loaded tile needs {m.max_tile_bytes / 1e3:.1f} kB of "
        f"{m.tile_limit_bytes / 1e3:.1f} kB; {largest} ({cats[largest] / MB:.1f} MB) is the "
        f"largest category; excess {over / 1e3:.1f} kB per tile "
        f"(~{over * (m.limit_bytes // m.tile_limit_bytes) / MB:.1f} MB over the IPU)"
    )
