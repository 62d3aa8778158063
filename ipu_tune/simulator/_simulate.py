"""Assembly: profile x system x plan -> SimResult (pure; caches are memoisation only).

Time of one weight-update step (train) or one micro-batch pass (infer), per replica:
  device step = pipelined passes (`_pipeline`) + exposed stream copies (`_host`)
              + weight update + gradient all-reduce + streaming-memory traffic
  device call = device iterations x device step + per-call cost
  call        = host + device call (synchronous loader) or max(host, device call) (async)
Throughput = samples per call (all replicas) / call time; 0.0 when the plan does not fit.

Collectives: ring all-reduce of the gradients over IPU-Links, 2(r-1)/r x bytes per IPU
(seed guide 4.3.1, Fig 4.3); replicated tensor sharding reduce-scatters the gradients and
all-gathers the updated weights ((r-1)/r x bytes each, seed guide 4.7, ZeRO) and adds the
gather/scatter compute sets. Offloaded optimizer state is read and written over the
streaming-memory path at every weight update (seed guide 4.4.4).
"""

from __future__ import annotations

import math
from typing import Any

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import _host
from ipu_tune.simulator._compute import block_costs
from ipu_tune.simulator._constants import (
    DEFAULT_CONSTANTS,
    OPTIMIZER_STATE,
    SimConstants,
    state_bytes_per_param,
)
from ipu_tune.simulator._memory import stage_memory, stash_depth
from ipu_tune.simulator._pipeline import StageParts, pipeline_step
from ipu_tune.simulator._result import TIME_PHASES, IpuMemory, SimResult, StageTime
from ipu_tune.simulator._stages import stage_shapes

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
    ipu = system.ipu
    clock = ipu.clock_hz
    training = plan.training
    fp16 = plan.model_fp16
    wb = 2.0 if fp16 else 4.0
    b = plan.micro_batch_size
    g = plan.gradient_accumulation if training else 1
    r = plan.replication_factor
    n = plan.stages
    compute_tiles = ipu.tiles - plan.io_tiles
    recompute = training and plan.recompute != "none"

    shapes = stage_shapes(profile, plan)
    costs = block_costs(
        profile, ipu, b, fp16, plan.available_memory_proportion, compute_tiles, training, c
    )
    link_bw = ipu.ipu_link_bytes_per_s * c.ipu_link_efficiency
    mb_in_bytes = _host.input_bytes_per_sample(profile, plan) * b
    fc, fx, fs = costs.fwd_compute, costs.fwd_exchange, costs.fwd_sets
    bc, bx, bs = costs.bwd_compute, costs.bwd_exchange, costs.bwd_sets

    parts: list[StageParts] = []
    memory: list[IpuMemory] = []
    stage_times: list[StageTime] = []
    wu_s = allreduce_s = stream_mem_s = rts_s = 0.0
    for x in shapes:
        s, lo, hi = x.stage, x.lo, x.hi
        f_comp = (fc[hi] - fc[lo]) / clock
        f_exch = (fx[hi] - fx[lo]) / clock
        send = (x.output_el * b * wb / link_bw + c.sync_latency_s) if s < n - 1 else 0.0
        sets = fs[hi] - fs[lo]
        if training:
            b_comp = (bc[hi] - bc[lo]) / clock
            b_exch = (bx[hi] - bx[lo]) / clock
            back = (x.input_el * b * wb / link_bw + c.sync_latency_s) if s > 0 else 0.0
            if recompute:
                p = StageParts(f_comp, f_exch, send, b_comp, b_exch, back, f_comp, f_exch)
                sets += sets
            else:
                p = StageParts(f_comp, f_exch, send, b_comp, b_exch, back)
            sets += bs[hi] - bs[lo]
        else:
            p = StageParts(f_comp, f_exch, send)
        parts.append(p)
        stage_times.append(StageTime(
            stage=s,
            blocks=(x.first_block, x.last_block),
            forward_s=f_comp + f_exch,
            backward_s=p.b_compute + p.b_exchange,
            recompute_s=p.r_compute + p.r_exchange,
            inter_ipu_s=p.f_link + p.b_link,
        ))
        cats, max_tile = stage_memory(
            x,
            temp_bytes=max(costs.temp_block[lo:hi]),
            compute_sets=sets,
            io_bytes_per_micro_batch=mb_in_bytes if s == 0 else 0.0,
            ipu=ipu, c=c, training=training, fp16=fp16, optimizer=plan.optimizer,
            gradient_accumulation=g, micro_batch=b, schedule=plan.schedule, stages=n,
            recompute=plan.recompute, offload=plan.offload_optimizer_state,
            rts=plan.replicated_tensor_sharding, replicas=r,
            prefetch_depth=plan.prefetch_depth, io_tiles=plan.io_tiles,
        )
        memory.append(IpuMemory(
            ipu=s, stage=s, categories=cats, limit_bytes=ipu.sram_bytes,
            max_tile_bytes=max_tile, tile_limit_bytes=ipu.sram_bytes_per_tile,
        ))

        if training:
            shard = r if plan.replicated_tensor_sharding else 1
            spec = OPTIMIZER_STATE[plan.optimizer]
            params, param_ops = x.params, x.param_ops
            touched = (params / shard) * (2 + spec.moments + (1 if g > 1 else 0))
            wu_s = max(wu_s, (touched * c.weight_update_cycles_per_element / compute_tiles
                              + param_ops * c.compute_set_overhead_cycles) / clock)
            if plan.offload_optimizer_state:
                state = params / shard * state_bytes_per_param(plan.optimizer, fp16)
                stream_mem_s = max(stream_mem_s, 2.0 * state / ipu.streaming_memory_bytes_per_s)
            if r > 1:
                grad_bytes = params * wb
                ring = (r - 1) / r
                if plan.replicated_tensor_sharding:
                    gather = ring * params * wb / link_bw
                    coll = ring * grad_bytes / link_bw + gather + (
                        2 * param_ops * c.compute_set_overhead_cycles / clock)
                    rts_s = max(rts_s, gather)
                else:
                    coll = 2.0 * ring * grad_bytes / link_bw
                coll += 2 * (r - 1) * c.sync_latency_s
                allreduce_s = max(allreduce_s, coll)

    core = pipeline_step(parts, plan.schedule, g, training)
    copy_s = _host.stream_copy_s(mb_in_bytes, system, plan, c)
    overlap = _host.io_overlaps(plan)
    exposed_copy = max(0.0, copy_s - core.slot) if overlap else copy_s
    di = plan.device_iterations
    ramp = core.ramp if training else core.ramp / di
    host_io = g * exposed_copy
    device_step = core.compute + core.exchange + core.inter_ipu + ramp + host_io + (
        wu_s + allreduce_s + stream_mem_s)
    call_cost = _host.call_overhead_s(system, c)
    device_call = di * device_step + call_cost
    samples_per_call = plan.samples_per_call
    per_sample = _host.host_seconds_per_sample(profile, system, plan, c)
    workers = _host.workers_per_host(system, plan)
    host_call = (samples_per_call / system.hosts) * per_sample / workers
    if plan.async_dataloader:
        call = max(host_call, device_call)
        host_exposed = max(0.0, host_call - device_call)
    else:
        call = host_call + device_call
        host_exposed = host_call

    phases = dict.fromkeys(TIME_PHASES, 0.0)
    phases["compute"] = core.compute
    phases["exchange"] = core.exchange
    phases["inter_ipu"] = core.inter_ipu
    phases["pipeline_ramp"] = ramp
    phases["weight_update"] = wu_s
    phases["all_reduce"] = allreduce_s
    phases["streaming_memory"] = stream_mem_s
    phases["host_io"] = host_io
    phases["host_preprocess"] = host_exposed / di
    phases["host_overhead"] = call_cost / di

    fits = all(m.fits for m in memory)
    reason = "" if fits else _reason(memory, mb_in_bytes, plan.io_tiles, c.io_tile_overhead)
    if not fits:
        bottleneck = "out_of_memory"
    elif plan.async_dataloader and host_call > device_call:
        bottleneck = "host_preprocess"
    else:
        bottleneck = max(phases, key=phases.__getitem__)
    step_time = call / di
    # Latency of one micro-batch: pipeline slots are synchronous across IPUs (module docstring
    # of `_pipeline`), so a micro-batch crosses N stages in N slots of the longest stage;
    # sharded or one stage: the stages one after another (core.slot is then their sum).
    pipelined = n > 1 and plan.schedule != "sharded"
    latency = n * core.slot if pipelined else core.slot
    extras: dict[str, Any] = {
        "device_call_s": device_call,
        "device_call_cycles": device_call * clock,
        "host_call_s": host_call,
        "host_s_per_sample": per_sample,
        "samples_per_call": samples_per_call,
        "stream_copy_s": copy_s,
        "io_overlap": overlap,
        "compute_tiles": compute_tiles,
        "stash_depths": [stash_depth(plan.schedule, n, s) if training else 0 for s in range(n)],
        "stage_slot_s": [p.slot if training else p.forward for p in parts],
        "amp_max_passes": costs.max_passes,
        "rts_gather_s": rts_s,
        "simulator_constants": "default" if c is DEFAULT_CONSTANTS else "custom",
    }
    return SimResult(
        fits=fits,
        throughput=samples_per_call / call if fits else 0.0,
        step_time_s=step_time,
        phases=phases,
        bottleneck=bottleneck,
        memory=tuple(memory),
        stages=tuple(stage_times),
        reason=reason,
        samples_per_step=plan.samples_per_step,
        device_throughput=samples_per_call / device_call,
        extras=extras,
        latency_s=latency,
    )


def _reason(memory: list[IpuMemory], mb_in_bytes: float, io_tiles: int, io_overhead: float) -> str:
    for m in memory:
        if m.fits:
            continue
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
    return ""
