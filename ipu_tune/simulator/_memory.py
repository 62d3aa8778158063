"""Memory of one IPU (one pipeline stage of one replica) by PopVision category, and its tiles.

Sources per category:
- code / exchange_code: grow with the compute sets the IPU runs (forward, backward, recomputed
  forward, serial AMP passes, and a replicated program's gradient all-reduce:
  `all_reduce_compute_sets_per_buffer` per merged buffer, whatever the replicas); global
  exchange code grows with the steps of the gradient all-reduce's rings, so linearly with
  replicas inside one tier (seed guide 4.3.1, Table 4.1: 1 -> 4 replicas, control code x1.28,
  internal exchange x1.17, global exchange x4.5) and far slower across the tiers of a large
  system. Constants in `_constants.py`.
- weights: model precision, fp16 2 B, fp32 4 B (seed hands-on "Half precision").
- gradients: accumulators, train with gradient accumulation > 1 only, in the model precision
  (seed: poptorch AdamW accum_type=float16 for a .16 model).
- optimizer_state: moments as `OPTIMIZER_STATE` keeps them; 0 on chip when offloaded to
  streaming memory (pipelining tutorial "offloading"), divided by replicas with replicated
  tensor sharding (seed guide 4.7).
- activation_stash: grouped schedule stashes 2(N-s)+1 micro-batches on stage s (s=0 first
  IPU), interleaved N+1 (seed guide 4.2), sharded 1.
- recompute: `auto` is PopTorch's default (`recompute_mode`): PopART pipeline recomputation
  (`autoRecomputation = RecomputationType::Pipeline`) when the plan is pipelined (more than one
  stage, not sharded), none otherwise (graphcore/poptorch Compiler.cpp; docs/references.md).
- recompute_checkpoints: `checkpoints` stashes only each stage's input (a single-stage program
  has no stage boundary and keeps block boundaries, as MLPerf ResNet-50 places its checkpoints);
  `every_block` stashes block boundaries (seed guide 4.2 "pipelining comes with recomputation").
  Recomputing block by block, the micro-batch in its backward peaks at the block whose own
  activations plus the checkpoints still held before it are largest (the backward frees
  checkpoints last to first; PopVision liveness: tensors never live at once share memory).
- activations: the live activations of one micro-batch (plus the recomputed ones of the stage
  or block during its backward); inference keeps its graph's live ranges (`_inference`: batch
  norm folded, elementwise ops in place) and nothing of training's gradients, state or stash.
- temporaries: the largest conv/matmul scratch, capped by AMP x SRAM (`_compute.py`).
- stream_buffers: prefetch depth x micro-batch input (1 B per element with 8-bit I/O; seed
  guide 4.4.1, 4.4.3).
- io_tiles: whole tiles reserved for I/O; they must hold a micro-batch with ~5% overhead
  (seed guide 4.4.2: N_IO ~ 1.05 x bytes(micro-batch) / S_tile).
Per tile: always-live code spreads unevenly, variables evenly (constants give the imbalance).
"""

from __future__ import annotations

from dataclasses import dataclass

from ipu_tune.hardware import System
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._collectives import merged_buffers, replica_layout
from ipu_tune.simulator._constants import SimConstants, state_bytes_per_param
from ipu_tune.simulator._stages import StageShape

__all__ = ["PlanMemory", "plan_memory", "recompute_mode", "stage_memory", "stash_depth"]


def recompute_mode(plan: ExecutionPlan) -> str:
    """The recomputation a plan runs: `none`, `checkpoints` or `every_block`; `auto` resolves
    as PopTorch does (pipeline recomputation, i.e. `checkpoints` at stage boundaries, under
    PipelinedExecution over more than one IPU; none for one stage, a sharded plan or
    inference: poptorch Compiler.cpp sets `autoRecomputation = Pipeline` in the pipelined
    case only)."""
    if not plan.training:
        return "none"
    if plan.recompute == "auto":
        return "checkpoints" if plan.pipelined else "none"
    return plan.recompute


def stash_depth(schedule: str, stages: int, stage: int) -> int:
    """Micro-batches whose activations stage `stage` keeps for its backward (seed guide 4.2)."""
    if stages == 1 or schedule == "sharded":
        return 1
    if schedule == "interleaved":
        return stages + 1
    return 2 * (stages - stage) + 1


@dataclass(slots=True)
class PlanMemory:
    """What `stage_memory` (and `simulate`) need of the plan, the IPU and the constants, read
    once per simulate rather than once per stage (the hot path of a cached evaluation; slotted,
    not frozen, for the reasons of `_pipeline.StageParts`)."""

    training: bool
    gradient_accumulation: int
    stages: int
    schedule: str
    recompute: str  # resolved by `recompute_mode`
    model_fp16: bool
    wb: float  # bytes per weight/activation element
    per_param: float  # optimizer state bytes per parameter on chip
    opt_divisor: int  # replicas with RTS, else 1
    offload: bool
    b: float  # micro-batch
    ring_steps: int  # of the gradient all-reduce across replicas (0: none)
    prefetch_depth: int
    io_tiles: int
    io: float  # bytes of the I/O tiles
    compute_tiles: int
    sram_bytes_per_tile: int
    c: SimConstants


def plan_memory(plan: ExecutionPlan, system: System, c: SimConstants) -> PlanMemory:
    fp16 = plan.model_fp16
    ipu = system.ipu
    replicas = plan.replication_factor
    # Training replicas all-reduce their gradients; inference replicas run apart.
    ring_steps = (replica_layout(system, plan).ring_steps
                  if plan.training and replicas > 1 else 0)
    io_tiles = plan.io_tiles
    training = plan.training
    stages = len(plan.splits) + 1  # plan.stages
    recompute = recompute_mode(plan)
    sram_tile = ipu.sram_bytes_per_tile
    # Positional: the field order.
    return PlanMemory(
        training, plan.gradient_accumulation, stages, plan.schedule, recompute, fp16,
        2.0 if fp16 else 4.0, state_bytes_per_param(plan.optimizer, fp16),
        replicas if plan.replicated_tensor_sharding else 1, plan.offload_optimizer_state,
        float(plan.micro_batch_size), ring_steps, plan.prefetch_depth, io_tiles,
        float(io_tiles * sram_tile), ipu.tiles - io_tiles, sram_tile, c,
    )


def _training_state(x: StageShape, pm: PlanMemory) -> tuple[float, float, float, float, float]:
    """Bytes of gradients, optimizer state, activation stash and recompute checkpoints of a
    training stage, and its live activation elements per sample (seed guide 4.2: the stash
    holds 2(N-s)+1 micro-batches under the grouped schedule; recomputation keeps checkpoints
    instead of every activation). N is the number of IPUs a replica pipelines over, as the
    seed counts the FIFOs per IPU: a tied head run on IPU0 as a stage of its own after the
    last (`head_stage_count`) adds none to IPU0's first-stage FIFO, which the shipped BERT-Base
    SL512 layout [0, 4, 4, 4] needs to fit (calibration point bert_base_sl512_fits). The
    head's own activations (`StageShape.head_saved_el`) are kept at the last stage's depth:
    it is the pipeline's last stage, its backward right after its forward."""
    wb, b, stages = pm.wb, pm.b, pm.stages
    grads = x.params * wb if pm.gradient_accumulation > 1 else 0.0
    if pm.ring_steps and not grads:
        # Without accumulation a gradient lives until its all-reduce, and the collectives are
        # merged into buffers (`all_reduce_buffer_bytes`): up to one buffer of them is held.
        grads = min(x.params * wb, pm.c.all_reduce_buffer_bytes)
    opt = 0.0 if pm.offload else x.params * pm.per_param / pm.opt_divisor
    stash = checkpoints = 0.0
    depth = stash_depth(pm.schedule, stages, x.stage)
    if pm.recompute == "none":
        if stages > 1:
            head_depth = stash_depth(pm.schedule, stages, stages - 1)
            stash = (depth * (x.saved_el - x.head_saved_el) + head_depth * x.head_saved_el) * b * wb
            live = x.max_live_el
        else:
            live = x.saved_el + x.max_live_el
    elif pm.recompute == "checkpoints" and stages > 1 and pm.schedule != "sharded":
        # Pipeline recomputation (PopART's RecomputationType::Pipeline): the stage's input.
        checkpoints = depth * x.input_el * b * wb
        live = x.saved_el + x.max_live_el
    else:  # every_block, or checkpoints of an unpipelined program (Standard: block boundaries)
        older = (depth - 1) * (x.input_el + x.boundary_el)
        checkpoints = (older + x.input_el + x.peak_checkpoint_el) * b * wb
        live = x.peak_block_el
    if pm.recompute != "none" and stages > 1:
        # The tied head's stage on IPU0 checkpoints its input too, at the last stage's depth.
        checkpoints += stash_depth(pm.schedule, stages, stages - 1) * x.head_input_el * b * wb
    return grads, opt, stash, checkpoints, live


def _code_bytes(x: StageShape, pm: PlanMemory, compute_sets: float) -> tuple[float, float]:
    """Control code and exchange code of the IPU running stage `x`: per compute set (the
    stage's, and a replicated program's all-reduce's, per merged gradient buffer), plus the
    host exchange code and the global exchange code of the all-reduce's ring steps."""
    c = pm.c
    sets = compute_sets
    if pm.ring_steps:
        sets += c.all_reduce_compute_sets_per_buffer * merged_buffers(
            x.params, x.param_ops, pm.wb, c)
    code = c.vertex_code_bytes + c.code_bytes_per_compute_set * sets
    exchange = (c.exchange_code_bytes_per_compute_set * sets + c.host_exchange_code_bytes
                + c.global_exchange_bytes + c.global_exchange_bytes_per_ring_step * pm.ring_steps)
    return code, exchange


def stage_memory(
    x: StageShape,
    pm: PlanMemory,
    *,
    temp_bytes: float,
    compute_sets: float,
    io_bytes_per_micro_batch: float,
) -> tuple[dict[str, int], int, int]:
    """Bytes by category of the IPU running stage `x` of the plan `pm` describes, its
    most-loaded tile's bytes and its total bytes. `temp_bytes`/`compute_sets` come from the
    stage's block costs, `io_bytes_per_micro_batch` is the stage's host input (0 but for the
    first stage)."""
    c = pm.c
    wb = pm.wb
    b = pm.b
    weights = x.params * wb
    if pm.training:
        grads, opt, stash, checkpoints, live = _training_state(x, pm)
    else:  # the inference graph's liveness (`_inference`): no stash, gradients or state
        grads = opt = stash = checkpoints = 0.0
        live = x.infer_live_el
    activations = live * b * wb
    code, exchange = _code_bytes(x, pm, compute_sets)
    streams = pm.prefetch_depth * io_bytes_per_micro_batch
    io = pm.io
    io_tiles = pm.io_tiles
    # Summed in MEMORY_CATEGORIES order (the report's), as the dict below lists them.
    variable = sum((code, exchange, weights, grads, opt, stash, checkpoints, activations,
                    temp_bytes, streams, io)) - (code + exchange) - io
    max_tile = (
        (code + exchange) * (1.0 + c.always_live_tile_imbalance)
        + variable * (1.0 + c.variable_tile_imbalance)
    ) / pm.compute_tiles
    if io_tiles:
        # An I/O tile holds its share of the micro-batch in transfer (seed guide 4.4.2).
        max_tile = max(max_tile, c.io_tile_overhead * io_bytes_per_micro_batch / io_tiles)
    # A literal in MEMORY_CATEGORIES order (tests/simulator/test_memory.py): half the cost of
    # dict(zip(MEMORY_CATEGORIES, map(round, ...))), built for every IPU of every simulate.
    cats = {
        "code": round(code),
        "exchange_code": round(exchange),
        "weights": round(weights),
        "gradients": round(grads),
        "optimizer_state": round(opt),
        "activation_stash": round(stash),
        "recompute_checkpoints": round(checkpoints),
        "activations": round(activations),
        "temporaries": round(temp_bytes),
        "stream_buffers": round(streams),
        "io_tiles": round(io),
    }
    return cats, round(max_tile), sum(cats.values())
