"""`popart_options.py`: `popart.SessionOptions` for a plan, every field with its reason.

Field and type names as PopART's Python bindings spell them (PopART source,
willow/include/popart/sessionoptions.hpp, tensorlocation.hpp, dataflow.hpp, SDK 3.4). PopART
builds the graph from ONNX, so what is per-op (pipeline stage and virtual graph of each op) is left
to the user's builder, with the stage starts named.
"""

from __future__ import annotations

from ._context import ALL_REDUCE_BUFFER_BYTES, EveryPlan, ExportContext, compile_problems
from ._docs import cite
from ._fold_bn import popart_fold_lines
from ._model_source import literal, module_path
from ._poprun import poprun_lines
from ._schedules import POPART
from ._serialize import popart_serialize_lines
from ._source import docstring, knob, program

__all__ = ["PopArtExporter"]


def _replication_lines(ctx: ExportContext) -> list[str]:
    r = ctx.replicas
    local = [
        f"opts.enableReplicatedGraphs = {r > 1}",
        f"opts.replicatedGraphCount = {r}",
    ]
    reason = (
        f"Replicas {r}: data-parallel copies of the graph ({cite('popart_replication')};"
        f" {cite('replication')}). {ctx.facts.all_reduce_sentence()}"
    )
    merge = _all_reduce_lines(ctx)
    if ctx.host_instances <= 1:
        return knob(reason, *local) + merge
    return [
        f"# {reason}",
        f"# {ctx.host_instances} PopRun instances ({cite('popdist')}): under poprun, popdist sets"
        " this instance's replicas and the global replication (enableReplicatedGraphs,"
        " replicatedGraphCount, enableDistributedReplicatedGraphs, globalReplicaOffset,"
        " globalReplicationFactor).",
        "if popdist.isPopdistEnvSet():",
        "    popdist.popart.configureSessionOptions(opts)",
        "else:",
        *(f"    {line}" for line in local),
        *merge,
    ]


def _all_reduce_lines(ctx: ExportContext) -> list[str]:
    """Why the gradient all-reduces are not merged here: no listed SessionOptions field."""
    if not ctx.merges_all_reduces:
        return []
    return [
        "# Gradient all-reduces: ipu-tune simulated them merged into buffers of"
        f" {ALL_REDUCE_BUFFER_BYTES / 2**20:g} MiB ({cite('scaling')}). ipu-tune knows no"
        " SessionOptions field (sessionoptions.hpp, as this program's other fields) that merges"
        " them or sizes their buffer, so none is set here and each gradient may be reduced on"
        " its own, slower than simulated. PopTorch merges them by passing"
        " replicatedCollectivesSettings.mergeAllReduceCollectives to PopART: set that field"
        " too if your PopART's Python bindings expose it.",
    ]


def _pipeline_lines(ctx: ExportContext) -> list[str]:
    facts = ctx.facts
    p = ctx.plan
    if ctx.stages == 1:
        return ["# One stage: no pipelining, one virtual graph per replica."]
    starts = [module_path(ctx.config, s) for s in p.splits]
    stage_note = (
        f"# {ctx.stages} stages: annotate each op with builder.virtualGraph(ipu) and"
        " builder.pipelineStage(stage) (PopART's Builder); stage s begins at the op of"
        f" STAGE_STARTS[s - 1] (the torch module names ipu-tune split at). {facts.stage_balance()}"
    )
    lines = [stage_note, f"STAGE_STARTS = {literal(starts)}", *_head_lines(ctx)]
    if p.schedule == "sharded":
        return lines + knob(
            "Schedule sharded: stages one after another on their IPUs, no pipelining"
            f" ({cite('pipeline')}). {facts.why_sharded()}",
            "opts.enablePipelining = False",
            "opts.virtualGraphMode = popart.VirtualGraphMode.Manual",
        )
    why = f"Pipelined ({cite('popart_pipeline')}; {cite('pipeline')})."
    if p.schedule == "interleaved":
        why += (
            " NOTE: ipu-tune chose the interleaved schedule, but PopART's SessionOptions have"
            " no interleaved pipeline schedule (executionPhaseSettings' Interleaving schedules"
            " execution phases, not a pipeline), so PopART's default schedule runs, which"
            " stashes more on the first IPU than the plan was simulated with. Run the plan"
            " with the TensorFlow program (PipelineSchedule.Interleaved), or re-plan for"
            " PopART with plan.pipeline.schedule=grouped. " + facts.headroom_sentence()
        )
    manual = "opts.virtualGraphMode = popart.VirtualGraphMode.Manual"
    return lines + knob(why, "opts.enablePipelining = True", manual)


def _head_lines(ctx: ExportContext) -> list[str]:
    """The tied output head's IPU as simulated (`ExportContext.head`), and its stage: one of
    its own after the last, since its input comes from the last stage."""
    head = ctx.head
    if head is None:
        return []
    module = module_path(ctx.config, head.module)
    return [
        f"# The output head {module} shares its weight with the input embeddings and runs on"
        f" IPU{head.stage}, as simulated: annotate its ops with"
        f" builder.virtualGraph(HEAD_IPU[{module!r}]) and builder.pipelineStage({ctx.stages}),"
        " a stage after the last, whose output it takes.",
        f"HEAD_IPU = {literal({module: head.stage})}",
    ]


def _recompute_name(ctx: ExportContext) -> str | None:
    """The RecomputationType the plan means in PopART, or None to leave PopART's default."""
    p = ctx.plan
    if not p.training:
        return None
    if p.recompute == "none":
        return "NoRecompute"
    if p.recompute == "auto":
        # PopTorch's default, which the plan's `auto` means: Pipeline when pipelined.
        return "Pipeline" if ctx.pipelined else None
    return "Pipeline" if ctx.pipelined else "Standard"


def _training_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    if not p.training:
        return ["# Inference: no gradient accumulation, recomputation or optimizer state."]
    out = knob(
        f"Gradient accumulation {p.gradient_accumulation}: micro-batches per weight update"
        f" ({cite('gradient_accumulation')}). {ctx.facts.ga_sentence()}",
        f"opts.enableGradientAccumulation = {p.gradient_accumulation > 1}",
        f"opts.accumulationFactor = {p.gradient_accumulation}",
    )
    mode = _recompute_name(ctx)
    why = f"Recomputation {p.recompute} ({cite('recompute')})"
    if p.recompute == "auto":
        why += ": PopTorch's default, Pipeline recomputation when pipelined (PopART's own is None)"
    if mode is None:
        out.append(f"# {why}: PopART's default (none) left as it is.")
    else:
        out += knob(
            f"{why}. {ctx.facts.recompute_sentence()}",
            f"opts.autoRecomputation = popart.RecomputationType.{mode}",
        )
    if p.recompute == "every_block" or (p.recompute == "checkpoints" and ctx.stages > 1):
        where = "each stage boundary" if p.recompute == "checkpoints" else "each block's output"
        out.append(f"# Mark checkpoints with builder.checkpointOutput(...) at {where}.")
    elif p.recompute == "checkpoints":
        out.append("# One stage: Standard recomputation picks its checkpoints itself.")
    offload, rts = p.offload_optimizer_state, p.replicated_tensor_sharding
    out += [
        f"# Optimizer state in streaming memory: {offload} ({cite('offload')})."
        f" {ctx.facts.offload_sentence(offload)}",
        f"# Replicated tensor sharding: {rts} ({cite('popart_rts')}). {ctx.facts.rts_sentence(p)}",
    ]
    if offload or rts:
        storage = "OffChip" if offload else "OnChip"
        sharding = "On" if rts else "Off"
        min_rts = p.replication_factor if rts else 8192  # 8192: PopART's default
        out += [
            "opts.optimizerStateTensorLocationSettings = popart.TensorLocationSettings(",
            f"    popart.TensorLocation(popart.TensorStorage.{storage},"
            f" popart.ReplicatedTensorSharding.{sharding}),",
            "    2,",
            f"    {min_rts},",
            ")",
        ]
    return out


def _memory_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    amps = p.stage_memory_proportions
    uniform = len(set(amps)) == 1
    amp = f"{amps[0] if uniform else p.available_memory_proportion:g}"
    partials = ctx.runs("plan.partials")
    return [
        *knob(
            f"Available memory proportion {amp} for every conv and matmul"
            f"{'' if uniform else ' that names no IPU of its own (below)'} ({cite('amp')});"
            f" option values are strings. {ctx.facts.category_sentence('temporaries')}",
            f'opts.convolutionOptions = {{"availableMemoryProportion": "{amp}"'
            + (f', "partialsType": "{p.partials}"}}' if partials else "}"),
            f'opts.matmulOptions = {{"availableMemoryProportion": "{amp}"}}',
        ),
        *([] if uniform else [
            f"# Each IPU's own proportion: call builder.setAvailableMemoryProportion(output,"
            " AVAILABLE_MEMORY_PROPORTION_PER_IPU[ipu]) on the output of each conv and matmul"
            f" you build under builder.virtualGraph(ipu) ({cite('amp')}).",
            f"AVAILABLE_MEMORY_PROPORTION_PER_IPU = {literal(list(amps))}",
        ]),
        *(knob(
            f"Partials {p.partials} for matmuls (and convolutions above) ({cite('partials')}).",
            f'opts.partialsTypeMatMuls = "{p.partials}"',
        ) if partials else [ctx.not_run("plan.partials")]),
    ]


def _io_lines(ctx: ExportContext) -> list[str]:
    facts = ctx.facts
    p = ctx.plan
    out = knob(
        "Synthetic data, as simulated: PopART makes the inputs on the IPU, so no host-device"
        f" stream runs ({cite('popart_synthetic')}). Set it back to Off to feed your data,"
        " and simulate that data (model.dataset) to see what its host pipeline costs.",
        "opts.syntheticDataMode = popart.SyntheticDataMode.RandomNormal",
    ) if ctx.synthetic else []
    out += [
        *knob(
            f"Batches per step {p.device_iterations}: pass BATCHES_PER_STEP to"
            " popart.DataFlow(BATCHES_PER_STEP, anchors), the device iterations of one"
            f" session.run ({cite('popart_dataflow')}). {facts.phase_sentence('host_overhead')}",
            f"BATCHES_PER_STEP = {p.device_iterations}",
        ),
        *knob(
            f"Buffering depth {p.prefetch_depth} of host streams ({cite('prefetch')});"
            " defaultBufferingDepth replaced defaultPrefetchBufferingDepth in PopART 2.5."
            f" {facts.phase_sentence('host_io')}",
            f"opts.defaultBufferingDepth = {p.prefetch_depth}",
        ),
    ]
    if not p.io_tiles:
        return [*out, "# I/O tiles: 0 (no tiles taken from compute; transfers do not overlap)."]
    out += knob(
        f"{p.io_tiles} I/O tiles for host transfers ({cite('popart_io')}; {cite('io_tiles')})."
        f" {facts.category_sentence('io_tiles')}",
        f"opts.numIOTiles = {p.io_tiles}",
    )
    if ctx.pipelined:
        return [*out, "# No overlap with pipelining (as PopTorch): the tiles hold the streams."]
    return out + knob(
        "Overlap I/O with compute: explicit main loops and host copy ops, a virtual graph mode"
        " other than Off, and inputs on the I/O tiles (give INPUT_SETTINGS to"
        " builder.addInputTensor).",
        "opts.enableExplicitMainLoops = True",
        "opts.useHostCopyOps = True",
        *(["opts.virtualGraphMode = popart.VirtualGraphMode.Auto"] if ctx.stages == 1 else []),
        "INPUT_SETTINGS = popart.InputSettings("
        "popart.TileSet.IO, popart.ExchangeStrategy.OverlapInnerLoop)",
    )


class PopArtExporter(EveryPlan):
    """`popart_options.py`: the PopART session options of the plan (valid Python)."""

    name = "popart"
    file_name = "popart_options.py"
    label = "PopART options"
    schedules = POPART

    def render(self, ctx: ExportContext) -> str:
        return _program(ctx)


def _program(ctx: ExportContext) -> str:
    p = ctx.plan
    name = ctx.model_label
    problems = compile_problems(ctx, "popart")
    header = docstring(
        f"PopART session options for {name} on {ctx.num_ipus} x {ctx.ipu}"
        f" ({ctx.layout_text}), {p.mode}.",
        *ctx.stand_in_lines(POPART),
        "Generated by ipu-tune from a simulated plan; needs only popart (and popdist under"
        " PopRun). Import `opts` and BATCHES_PER_STEP into the program that builds your ONNX"
        f" graph, and pass opts as userOptions to its session ({cite('popart_session')}). "
        + ctx.facts.summary(),
        *(["WARNING, breaks PopART's rules: " + "; ".join(problems)] if problems else []),
    )
    imports = ["import popart"]
    if ctx.host_instances > 1:
        imports += ["import popdist", "import popdist.popart"]
    lines = [
        *header,
        *poprun_lines(ctx, "python your_popart_program.py"),
        *imports,
        "",
        "opts = popart.SessionOptions()",
        *_replication_lines(ctx),
        *_pipeline_lines(ctx),
        *_training_lines(ctx),
        *_memory_lines(ctx),
        *_io_lines(ctx),
        f"# Precision {p.precision}: the ONNX graph's tensor types ({cite('precision')}).",
        *popart_fold_lines(ctx),
        *popart_serialize_lines(ctx),
        f"# 8-bit I/O {p.eight_bit_io}: "
        + (
            "declare the image input as UINT8 and cast and normalise in the graph"
            f" ({cite('eight_bit')})."
            if p.eight_bit_io
            else f"inputs arrive as {'FLOAT16' if p.input_fp16 else 'FLOAT'}."
        ) if ctx.runs("plan.eight_bit_io") else ctx.not_run("plan.eight_bit_io"),
    ]
    return program(lines)
