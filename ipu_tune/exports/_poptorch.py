"""`poptorch_options.py`: a PopTorch program that runs a plan, every knob with its reason.

The program needs only what a Poplar SDK environment has: poptorch, torch, torchvision (zoo
models), and popdist under PopRun. Every call is public PopTorch API as listed, with its source
line, in PopTorch's public source; every reason cites public Graphcore
documentation (`_docs.cite`) and, given a simulated result, quotes its figures.
"""

from __future__ import annotations

from ._context import ALL_REDUCE_BUFFER_BYTES, EveryPlan, ExportContext, compile_problems
from ._docs import cite
from ._fold_bn import poptorch_fold_lines
from ._model_source import literal, model_imports, model_lines, module_access, module_path
from ._poprun import poprun_lines
from ._poptorch_io import input_lines, optimizer_lines
from ._schedules import POPTORCH
from ._serialize import poptorch_serialize_lines
from ._source import docstring, knob, program

__all__ = ["PopTorchExporter"]

# PopART RecomputationType integers (sessionoptions.hpp L139): None 0, Standard 1, Pipeline 3.
_RECOMPUTE_NONE, _RECOMPUTE_STANDARD, _RECOMPUTE_PIPELINE = 0, 1, 3


def _options_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    if ctx.host_instances > 1:
        opts = [
            f"# {ctx.host_instances} PopRun instances ({cite('popdist')}): under poprun,"
            " popdist.poptorch.Options takes this instance's replicas and its place among the"
            " instances from PopRun (do not set replicationFactor or opts.Distributed there)."
            f" Without poprun, one process drives all {p.replication_factor} replicas.",
            "if popdist.isPopdistEnvSet():",
            f"    opts = popdist.poptorch.Options(ipus_per_replica={ctx.stages})",
            "else:",
            "    opts = poptorch.Options()",
            f"    opts.replicationFactor({p.replication_factor})",
            "# The same seed on every instance, so replicas start from the same weights.",
            "opts.randomSeed(42)",
        ]
    else:
        opts = [
            "opts = poptorch.Options()",
            *knob(
                f"Replication factor {p.replication_factor}: data-parallel copies of the"
                f" model ({cite('replication')}). {ctx.facts.all_reduce_sentence()}",
                f"opts.replicationFactor({p.replication_factor})",
            ),
        ]
    out = [
        *opts,
        *knob(
            f"Device iterations {p.device_iterations}: one host call runs this many steps"
            f" ({cite('device_iterations')}). {ctx.facts.phase_sentence('host_overhead')}",
            f"opts.deviceIterations({p.device_iterations})",
        ),
    ]
    if p.training:
        out += knob(
            f"Gradient accumulation {p.gradient_accumulation}: micro-batches per weight"
            " update; amortises the pipeline ramp and the weight update"
            f" ({cite('gradient_accumulation')}). {ctx.facts.ga_sentence()}",
            f"opts.Training.gradientAccumulation({p.gradient_accumulation})",
        )
    if ctx.merges_all_reduces:
        out += knob(
            "Merge the replicas' gradient all-reduces into fewer, larger collectives, as the"
            f" simulator times them in buffers of {ALL_REDUCE_BUFFER_BYTES / 2**20:g} MiB"
            f" ({cite('poptorch_all_reduce_merge')}; {cite('scaling')}). PopTorch lists no"
            " option for the buffer size: PopART sizes the merged collectives itself.",
            'opts._Popart.set("replicatedCollectivesSettings.mergeAllReduceCollectives", True)',
        )
    return out


def _begin_block(path: str, ipu: int) -> str:
    """`model.layer3[8] = poptorch.BeginBlock(model.layer3[8], ipu_id=1)`."""
    parent, _, last = path.rpartition(".")
    if last.isdigit() or (last.isidentifier()):
        target = module_access(path)
        return f"{target} = poptorch.BeginBlock({target}, ipu_id={ipu})"
    owner = module_access(parent) if parent else "model"
    return (
        f"setattr({owner}, {last!r}, poptorch.BeginBlock(getattr({owner}, {last!r}), ipu_id={ipu}))"
    )


def _overlaps(ctx: ExportContext) -> bool:
    """Host I/O overlap is marked: I/O tiles and not PipelinedExecution (Compiler.cpp L1766)."""
    return ctx.plan.io_tiles > 0 and not ctx.pipelined


def _pipeline_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    if ctx.stages == 1:
        out = ["# One stage: the whole model on one IPU per replica, no pipelining."]
        if _overlaps(ctx):
            out += knob(
                "Overlapped I/O needs a strategy other than PipelinedExecution, even on one"
                f" IPU ({cite('overlap')}).",
                "opts.setExecutionStrategy(poptorch.ShardedExecution())",
            )
        return out
    out = [
        f"# {ctx.stages} stages: each split begins a stage on the next IPU ({cite('blocks')})."
        f" {ctx.facts.stage_balance()}"
    ]
    out += [_begin_block(module_path(ctx.config, split), ipu)
            for ipu, split in enumerate(p.splits, start=1)]
    out += _head_lines(ctx)
    stage = _auto_stage(ctx)
    if p.schedule == "sharded":
        return out + knob(
            "Schedule sharded: one stage at a time, so only one IPU works at once"
            f" ({cite('sharded')}). {ctx.facts.why_sharded()}",
            f"opts.setExecutionStrategy(poptorch.ShardedExecution({stage}))",
        )
    if p.schedule == "interleaved":
        why = (
            "Schedule interleaved: N+1 stashed activations per stage instead of 2N+1 on the"
            f" first IPU ({cite('pipeline')}). NOTE: PopTorch has no interleaved schedule"
            " (its strategies are PipelinedExecution, ShardedExecution and the phased ones), so"
            " this program runs the grouped schedule, which stashes more on the first IPU than"
            " the plan was simulated with. Run the plan with the TensorFlow program"
            " (PipelineSchedule.Interleaved), or re-plan for PopTorch with"
            " plan.pipeline.schedule=grouped. " + ctx.facts.headroom_sentence()
        )
    else:
        why = f"Schedule grouped, PopART's default ({cite('pipeline')}; {cite('pipelined')})."
    return out + knob(why, f"opts.setExecutionStrategy(poptorch.PipelinedExecution({stage}))")


def _head_lines(ctx: ExportContext) -> list[str]:
    """The tied output head on the IPU the simulator ran it on (`ExportContext.head`): called
    after the last layer, it would otherwise belong to the last block, on the last IPU."""
    head = ctx.head
    if head is None or ctx.profile is None:
        return []
    first = module_path(ctx.config, ctx.profile.blocks[0])
    return [
        f"# The output head {head.module} shares its weight with the input embeddings: it runs"
        f" on IPU{head.stage}, as simulated and as optimum-graphcore and Graphcore's BERT place"
        f" it ({cite('blocks')}); the last stage sends its output back to IPU{head.stage}."
        " Each block is a stage of its own (AutoIncrement, below), the first one named too.",
        _begin_block(first, 0),
        _begin_block(module_path(ctx.config, head.module), head.stage),
    ]


def _auto_stage(ctx: ExportContext) -> str:
    """How blocks become pipeline stages. The placed head's block runs after the last stage
    on an earlier IPU: under SameAsIpu it would join that IPU's stage, before the stages whose
    output it takes; AutoIncrement gives it a stage of its own after them, as optimum-graphcore
    sets it (`ipu_configuration.py`)."""
    return "poptorch.AutoStage.AutoIncrement" if ctx.head else "poptorch.AutoStage.SameAsIpu"


def _checkpoint_lines(names: list[str]) -> list[str]:
    """A `poptorch.recomputationCheckpoint` on the outputs of each named module."""
    return [
        "",
        "",
        "def checkpoint_outputs(module: torch.nn.Module) -> None:",
        '    """Keep the module\'s outputs: recompute only between checkpoints (as Graphcore\'s',
        '    BERT example does)."""',
        "",
        "    def hook(_module, _inputs, outputs):",
        "        if isinstance(outputs, torch.Tensor):",
        "            return poptorch.recomputationCheckpoint(outputs)",
        "        return tuple(poptorch.recomputationCheckpoint(y) for y in outputs)",
        "",
        "    module.register_forward_hook(hook)",
        "",
        "",
        "checkpoints = [",
        *(f"    {literal(n)}," for n in names),
        "]",
        "for name in checkpoints:",
        "    checkpoint_outputs(model.get_submodule(name))",
    ]


def _before(blocks: list[str], starts: list[str]) -> list[str]:
    """The block just before each of `starts` (whose output crosses into it)."""
    return [blocks[blocks.index(s) - 1] for s in starts if s in blocks and blocks.index(s) > 0]


def _recompute_lines(
    ctx: ExportContext
) -> list[str]:
    facts = ctx.facts
    p = ctx.plan
    if not p.training:
        return ["# Recomputation: inference has no backward pass."]
    pipelined = ctx.pipelined
    if p.recompute == "auto":
        default = (
            "PopTorch sets PopART's pipeline recomputation (autoRecomputation = Pipeline) for a"
            " pipeline over more than one IPU"
            if pipelined
            else "PopTorch recomputes nothing outside a pipeline (one stage, or sharded)"
        )
        return [
            f"# Recomputation: auto, PopTorch's default left as it is: {default}"
            f" ({cite('recompute')}). {facts.recompute_sentence()}"
        ]
    if p.recompute == "none":
        return knob(
            "Recomputation: none; every activation is kept (PopTorch would otherwise recompute"
            f" a pipeline) ({cite('recompute')}). {facts.category_sentence('activation_stash')}",
            f'opts._Popart.set("autoRecomputation", {_RECOMPUTE_NONE})',
        )
    mode = _RECOMPUTE_PIPELINE if pipelined else _RECOMPUTE_STANDARD
    name = "Pipeline" if pipelined else "Standard"
    out = knob(
        f"Recomputation: {p.recompute}; PopART {name} recomputation keeps checkpoints instead"
        f" of every activation at the cost of a second forward ({cite('recompute')})."
        f" {facts.recompute_sentence()}",
        f'opts._Popart.set("autoRecomputation", {mode})',
    )
    if not pipelined:
        # Graphcore's CNN example sets explicit recomputation with Standard (ipu_settings.py).
        out.append('opts._Popart.set("explicitRecomputation", True)')
    blocks = ([module_path(ctx.config, b) for b in ctx.profile.blocks]
              if ctx.profile is not None else [])
    splits = [module_path(ctx.config, s) for s in p.splits]
    if p.recompute == "every_block":
        names = blocks[:-1] if blocks else _before(blocks, splits)
        what = "every block"
    else:
        names = _before(blocks, splits) if blocks else []
        what = "every stage boundary"
    if not names and splits and not blocks:
        return [
            *out,
            "# No model profile was given: checkpoint the module before each split yourself.",
        ]
    if not names:
        return out
    return [*out, f"# Checkpoints on the outputs at {what}.", *_checkpoint_lines(names)]


def _memory_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    amps = p.stage_memory_proportions
    proportions = {f"IPU{i}": amp for i, amp in enumerate(amps)}
    where = (f"{amps[0]:g} on every IPU" if len(set(amps)) == 1
             else f"{literal(list(amps))} on IPU0..IPU{len(amps) - 1}")
    torch_type = "torch.half" if p.partials == "half" else "torch.float"
    return [
        *knob(
            f"Available memory proportion {where} of a replica: the share of tile memory"
            f" conv/matmul temporaries may take ({cite('amp')})."
            f" {ctx.facts.category_sentence('temporaries')}",
            f"opts.setAvailableMemoryProportion({literal(proportions)})",
        ),
        *(knob(
            f"Partials {p.partials}: the type of conv/matmul intermediate sums; half is"
            f" faster and smaller, float more exact ({cite('partials')}).",
            f"opts.Precision.setPartialsType({torch_type})",
        ) if ctx.runs("plan.partials") else [ctx.not_run("plan.partials")]),
    ]


def _tensor_location_lines(ctx: ExportContext) -> list[str]:
    facts = ctx.facts
    p = ctx.plan
    lines = [
        f"# Optimizer state in streaming memory: {p.offload_optimizer_state} ({cite('offload')})."
        f" {facts.offload_sentence(p.offload_optimizer_state)}",
        f"# Replicated tensor sharding: {p.replicated_tensor_sharding}. {facts.rts_sentence(p)}",
    ]
    if not p.training or (not p.offload_optimizer_state and not p.replicated_tensor_sharding):
        return lines
    on_chip = not p.offload_optimizer_state
    chain = [f"    poptorch.TensorLocationSettings().useOnChipStorage({on_chip})"]
    if p.replicated_tensor_sharding:
        chain += [
            f"    .minElementsForReplicatedTensorSharding({p.replication_factor})",
            "    .useReplicatedTensorSharding(True)",
        ]
    return [*lines, "opts.TensorLocations.setOptimizerLocation(", *chain, ")"]


def _io_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    out = knob(
        "Synthetic data, as simulated: PopTorch makes the inputs on the IPU (random normal),"
        " so no host-device stream runs and the loader's settings below change nothing"
        f" ({cite('synthetic')}). Remove this line to feed your data, and simulate that data"
        " (model.dataset) to see what its host pipeline costs.",
        "opts.enableSyntheticData(True)",
    ) if ctx.synthetic else []
    out += knob(
        f"Prefetch depth {p.prefetch_depth}: the host fills stream buffers ahead of the"
        f" transfer ({cite('prefetch')}). {ctx.facts.phase_sentence('host_io')}",
        f'opts._Popart.set("defaultBufferingDepth", {p.prefetch_depth})',
    )
    if not p.io_tiles:
        return [*out, "# I/O tiles: 0 (no tiles taken from compute; transfers do not overlap)."]
    if _overlaps(ctx):
        note = (
            "IpuInput below marks the input for overlap; overlap needs output mode All or Sum"
            f" ({cite('overlap')})."
        )
        extra = ["opts.outputMode(poptorch.OutputMode.All)"]
    else:
        note = (
            "NOTE: PopTorch does not overlap I/O with PipelinedExecution, so the tiles are"
            " reserved but the transfer does not overlap here."
        )
        extra = []
    return [
        *out,
        f"# {p.io_tiles} I/O tiles overlap host transfers with compute ({cite('io_tiles')});"
        f" they must hold a micro-batch. {ctx.facts.category_sentence('io_tiles')} {note}",
        f"opts.TensorLocations.numIOTiles({p.io_tiles})",
        *extra,
    ]


def _header(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    name = ctx.model_label
    title = (
        f"PopTorch program for {name} on {ctx.num_ipus} x {ctx.ipu}"
        f" ({ctx.layout_text}), {p.mode},"
        f" precision {p.precision}."
    )
    needs = ["poptorch", "torch"]
    modules = " ".join(model_imports(ctx.config))
    needs += [m for m in ("torchvision", "transformers") if m in modules]
    needs += ["popdist"] if ctx.host_instances > 1 else []
    about = (
        f"Generated by ipu-tune from a simulated plan. Needs only {', '.join(needs)} (a Poplar"
        " SDK environment); it does not import ipu-tune. " + ctx.facts.summary()
    )
    problems = compile_problems(ctx, "poptorch")
    warn = ["WARNING, PopTorch will reject this plan at compile time: " + "; ".join(problems)]
    return [
        *docstring(title, *ctx.stand_in_lines(POPTORCH), about, *(warn if problems else [])),
        *poprun_lines(ctx, "python poptorch_options.py"),
    ]


class PopTorchExporter(EveryPlan):
    """`poptorch_options.py`: the PopTorch program of the plan (valid Python; needs poptorch)."""

    name = "poptorch"
    file_name = "poptorch_options.py"
    label = "PopTorch program"
    schedules = POPTORCH

    def render(self, ctx: ExportContext) -> str:
        return _program(ctx)


def _program(ctx: ExportContext) -> str:
    imports = ["import torch", *model_imports(ctx.config), "", "import poptorch"]
    if ctx.host_instances > 1:
        imports += ["import popdist", "import popdist.poptorch"]
    lines = [
        *_header(ctx),
        *imports,
        "",
        *model_lines(ctx.config, ctx.profile),
        *poptorch_fold_lines(ctx),
        *poptorch_serialize_lines(ctx),
        "",
        *_options_lines(ctx),
        *_pipeline_lines(ctx),
        *_recompute_lines(ctx),
        *_memory_lines(ctx),
        *_tensor_location_lines(ctx),
        *_io_lines(ctx),
        "",
        *input_lines(ctx, overlap=_overlaps(ctx)),
        "",
        *optimizer_lines(ctx),
    ]
    return program(lines)
