"""`tf_ipu_config.py`: TensorFlow 2's `IPUConfig` and the Keras pipeline arguments of a plan.

Names as Graphcore's TensorFlow 2.6 port and IPU Keras spell them (Graphcore's TensorFlow source,
tensorflow/python/ipu/config.py, ops/pipelining_ops.py, ipu_infeed_queue.py and
keras/ipu/extensions/functional_extensions.py, SDK 3.4). The Keras model is the user's: the
program configures the IPU system and a `configure_keras_model(model)` to call on it.
"""

from __future__ import annotations

from ._context import ALL_REDUCE_BUFFER_BYTES, EveryPlan, ExportContext, compile_problems
from ._docs import cite
from ._fold_bn import tf_fold_lines
from ._model_source import literal, module_path
from ._poprun import poprun_lines
from ._schedules import TENSORFLOW
from ._serialize import tf_serialize_lines
from ._source import docstring, knob, program

__all__ = ["TensorFlowExporter", "steps_per_execution"]

# ipu-tune schedule -> ipu.pipelining_ops.PipelineSchedule (Sequential runs one stage at a time).
_SCHEDULES = TENSORFLOW.train


def steps_per_execution(ctx: ExportContext) -> int:
    """Keras steps per execution: device iterations x accumulation (a multiple of the latter)."""
    return ctx.plan.device_iterations * (ctx.plan.gradient_accumulation if ctx.plan.training else 1)


def _allow_recompute(ctx: ExportContext) -> bool:
    """Recomputation on: `auto` means PopTorch's default, which recomputes a pipeline."""
    p = ctx.plan
    if not p.training or p.recompute == "none":
        return False
    return p.recompute != "auto" or ctx.stages > 1


def _system_lines(ctx: ExportContext) -> list[str]:
    facts = ctx.facts
    p = ctx.plan
    ipus = ctx.stages * p.replication_factor
    select = knob(
        f"{ipus} IPUs: {ctx.stages} per replica x {p.replication_factor} replicas; Keras"
        " replicates a model over the IPUs it does not use itself"
        f" ({cite('tf_replication')}). {facts.all_reduce_sentence()}",
        f"cfg.auto_select_ipus = {ipus}",
    )
    if ctx.host_instances > 1:
        select = [
            f"# {ctx.host_instances} PopRun instances ({cite('popdist')}; {cite('tf_popdist')}):"
            " under poprun, popdist picks this instance's IPUs and replicas.",
            "if popdist.isPopdistEnvSet():",
            f"    popdist.tensorflow.set_ipu_config(cfg, ipus_per_replica={ctx.stages},"
            " configure_device=True)",
            "else:",
            *(f"    {line}" for line in select),
        ]
    out = [
        "cfg = ipu.config.IPUConfig()",
        *select,
        *_option_lines(ctx),
        *knob(
            f"Recomputation {p.recompute}: allow_recompute={_allow_recompute(ctx)}"
            f" ({cite('tf_recompute')}).",
            f"cfg.allow_recompute = {_allow_recompute(ctx)}",
        ),
    ]
    out += _all_reduce_lines(ctx)
    if p.io_tiles:
        out += knob(
            f"{p.io_tiles} I/O tiles for host transfers ({cite('tf_io_tiles')}); overlap needs a"
            " single IPU or the Grouped pipeline schedule. " + facts.category_sentence("io_tiles"),
            f"cfg.io_tiles.num_io_tiles = {p.io_tiles}",
            "cfg.io_tiles.place_ops_on_io_tiles = True",
        )
    else:
        out.append("# I/O tiles: 0 (no tiles taken from compute; transfers do not overlap).")
    out.append("cfg.configure_ipu_system()")
    if ctx.host_instances > 1:
        return [
            *out,
            "if popdist.isPopdistEnvSet():",
            "    strategy = PopDistStrategy()",
            "else:",
            "    strategy = ipu.ipu_strategy.IPUStrategy()",
        ]
    return [*out, "strategy = ipu.ipu_strategy.IPUStrategy()"]


def _all_reduce_lines(ctx: ExportContext) -> list[str]:
    """Merge the gradients' cross-replica sums into buffers, as the simulator times them."""
    if not ctx.merges_all_reduces:
        return []
    mib = ALL_REDUCE_BUFFER_BYTES / 2**20
    return knob(
        f"Gradient all-reduces merged into buffers of up to {mib:g} MiB, as Graphcore's"
        " MLPerf ResNet-50 runs set it and as the simulator times them; 0 (the default) sums"
        f" each gradient on its own ({cite('tf_all_reduce_buffer')}; {cite('scaling')}).",
        f"cfg.optimizations.maximum_cross_replica_sum_buffer_size = {ALL_REDUCE_BUFFER_BYTES}",
    )


def _option_lines(ctx: ExportContext) -> list[str]:
    """The available memory proportion and the partials type (of an fp16 model only) of every
    matmul and convolution."""
    p = ctx.plan
    amps = p.stage_memory_proportions
    amp = f"{amps[0] if len(set(amps)) == 1 else p.available_memory_proportion:g}"
    partials = p.partials if ctx.runs("plan.partials") else None
    options = _poplar_options(amp, partials)
    return [
        *([] if partials else [ctx.not_run("plan.partials")]),
        *knob(
            f"Available memory proportion {amp}"
            + (f" and partials {partials}" if partials else "") + " for every matmul and"
            f" convolution{'' if len(set(amps)) == 1 else ' outside the pipeline stages'}"
            f" ({cite('amp')}" + (f"; {cite('partials')}" if partials else "")
            + f"); values are strings. {ctx.facts.category_sentence('temporaries')}",
            f"cfg.matmuls.poplar_options = {options}",
            f"cfg.convolutions.poplar_options = {options}",
        ),
    ]


def _poplar_options(amp: str, partials: str | None) -> str:
    """Poplar's options of a matmul or convolution (no partials type: the plan runs none)."""
    if partials is None:
        return f'{{"availableMemoryProportion": "{amp}"}}'
    return f'{{"availableMemoryProportion": "{amp}", "partialsType": "{partials}"}}'


def _stage_options_lines(ctx: ExportContext) -> list[str]:
    """Each stage's own available memory proportion, when the IPUs' differ: a
    PipelineStageOptions per stage for its forward (and backward) pass."""
    p = ctx.plan
    # The placed head's stage runs on its IPU, at that IPU's proportion.
    amps = [p.stage_memory_proportions[ipu] for ipu in ctx.device_mapping]
    if len(set(amps)) == 1:
        return []
    partials = p.partials if ctx.runs("plan.partials") else None
    return [
        f"    # Available memory proportion {literal(amps)} per pipeline stage (on the IPUs of"
        " device_mapping), each"
        f" stage's matmuls and convolutions ({cite('amp')}; {cite('tf_pipeline')}).",
        "    stage_options = [",
        "        ipu.pipelining_ops.PipelineStageOptions(convolution_options=o, matmul_options=o)",
        "        for o in (",
        *(f"            {_poplar_options(f'{a:g}', partials)}," for a in amps),
        "        )",
        "    ]",
    ]


def _stage_options_args(ctx: ExportContext) -> list[str]:
    if not _stage_options_lines(ctx):
        return []
    args = ["forward_propagation_stages_poplar_options=stage_options"]
    if ctx.plan.training:
        args.append("backward_propagation_stages_poplar_options=stage_options")
    return args


def _pipeline_args(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    args = [
        f"gradient_accumulation_steps_per_replica={p.gradient_accumulation}",
        f"device_mapping={literal(ctx.device_mapping)}",
        f"pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.{_SCHEDULES[p.schedule]}",
    ]
    if _allow_recompute(ctx):
        args.append("recomputation_mode=ipu.pipelining_ops.RecomputationMode.Auto")
    return args


def _state_args(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    return [
        f"offload_weight_update_variables={p.offload_optimizer_state}",
        f"replicated_optimizer_state_sharding={p.replicated_tensor_sharding}",
    ]


def _stage_lines(ctx: ExportContext) -> list[str]:
    """The body of `configure_keras_model` that sets stages, accumulation and state."""
    facts = ctx.facts
    p = ctx.plan
    body: list[str] = []
    if ctx.stages > 1:
        starts = [module_path(ctx.config, s) for s in p.splits]
        body += [
            f"    # {ctx.pipeline_stages} pipeline stages ({cite('tf_pipeline')}): put the layers"
            " of stage s under `with keras.ipu.PipelineStage(s):` or set them with"
            " model.set_pipeline_stage_assignment(...); stage s begins at the layer matching"
            f" torch module {literal(starts)}[s - 1].{_head_note(ctx)} {facts.stage_balance()}",
        ]
        if p.training:
            body += [
                f"    # Gradient accumulation {p.gradient_accumulation} per replica"
                f" ({cite('tf_ga')}); optimizer state offload {p.offload_optimizer_state}"
                f" ({cite('tf_offload')}) and sharding {p.replicated_tensor_sharding}"
                f" ({cite('tf_rts')}). {facts.ga_sentence()}",
                *_stage_options_lines(ctx),
                "    model.set_pipelining_options("
                + ", ".join(_pipeline_args(ctx) + _state_args(ctx) + _stage_options_args(ctx))
                + ")",
            ]
        else:
            body += [
                *_stage_options_lines(ctx),
                "    model.set_pipelining_options("
                f"device_mapping={literal(ctx.device_mapping)}, pipeline_schedule="
                f"ipu.pipelining_ops.PipelineSchedule.{_SCHEDULES[p.schedule]}"
                + "".join(", " + a for a in _stage_options_args(ctx)) + ")",
            ]
    elif p.training and (p.gradient_accumulation > 1 or p.offload_optimizer_state
                         or p.replicated_tensor_sharding):  # fmt: skip
        body += [
            f"    # Gradient accumulation {p.gradient_accumulation} per replica ({cite('tf_ga')});"
            f" optimizer state offload {p.offload_optimizer_state} ({cite('tf_offload')}) and"
            f" sharding {p.replicated_tensor_sharding} ({cite('tf_rts')}). {facts.ga_sentence()}",
            "    model.set_gradient_accumulation_options("
            f"gradient_accumulation_steps_per_replica={p.gradient_accumulation},"
            f" {', '.join(_state_args(ctx))})",
        ]
    return body


def _head_note(ctx: ExportContext) -> str:
    """Where the tied output head runs, as simulated (`ExportContext.head`): a stage after the
    last, mapped to its IPU by device_mapping."""
    head = ctx.head
    if head is None:
        return ""
    return (f" The output head (torch module {module_path(ctx.config, head.module)!r}), which"
            f" shares its weight with the input embeddings, is stage {ctx.stages}, on"
            f" IPU{head.stage} (device_mapping).")


def _checkpoints(ctx: ExportContext) -> tuple[str, list[str]] | None:
    """Where PopTorch's program puts its recomputation checkpoints, as (what the names are,
    torch module names): every block's output (the last block's is the model's) for
    `every_block`, the block before each split for `checkpoints` with a pipeline. Without a
    profile, the modules each stage begins at. None when there are no checkpoints."""
    p = ctx.plan
    if not _allow_recompute(ctx) or not (
            p.recompute == "every_block" or (p.recompute == "checkpoints" and ctx.stages > 1)):
        return None
    blocks = list(ctx.profile.blocks) if ctx.profile is not None else []
    if not blocks:
        return ("the layer just before the one matching each torch module",
                [module_path(ctx.config, s) for s in p.splits])
    names = (blocks[:-1] if p.recompute == "every_block" else
             [blocks[blocks.index(s) - 1] for s in p.splits if s in blocks[1:]])
    return ("the layer matching each torch module", [module_path(ctx.config, n) for n in names])


def _checkpoint_lines(ctx: ExportContext) -> list[str]:
    """Recomputation checkpoints as the PopTorch and PopART programs place them: the Keras model
    is the user's, so the program names the layers and gives the call to put after each."""
    found = _checkpoints(ctx)
    if found is None:
        return []
    what, names = found
    where = "every block" if ctx.plan.recompute == "every_block" else "every stage boundary"
    return [
        "",
        "",
        f"# Recomputation {ctx.plan.recompute} ({cite('tf_recompute')}): keep the outputs at"
        f" {where} and recompute only between them, as the PopTorch program's"
        " poptorch.recomputationCheckpoint does. Your Keras model's layers are yours: in its"
        f" call (or functional graph) pass the output of {what} in CHECKPOINT_MODULES through"
        " checkpoint(x)"
        + ("." if names else " (no profile was given: of each block of your model)."),
        "CHECKPOINT_MODULES = [",
        *(f"    {literal(n)}," for n in names),
        "]",
        "",
        "",
        "def checkpoint(x):",
        '    """A recomputation checkpoint on `x`: kept in memory, not recomputed."""',
        "    return ipu.pipelining_ops.recomputation_checkpoint(x)",
    ]


def _keras_lines(ctx: ExportContext) -> list[str]:
    p = ctx.plan
    body = [
        *_stage_lines(ctx),
        f"    # Prefetch depth {p.prefetch_depth} of the infeed ({cite('tf_prefetch')}; allowed"
        f" 1..255). {ctx.facts.phase_sentence('host_io')}",
        f"    model.set_infeed_queue_options(prefetch_depth={p.prefetch_depth})",
    ]
    return [
        "",
        "",
        "def configure_keras_model(model) -> None:",
        '    """Call inside strategy.scope() on your Keras model, before model.compile."""',
        *body,
        *_checkpoint_lines(ctx),
        "",
        "",
        *knob(
            f"model.compile(..., steps_per_execution=STEPS_PER_EXECUTION): {p.device_iterations}"
            f" device iterations x {p.gradient_accumulation if p.training else 1} accumulated"
            f" micro-batches, a multiple of the accumulation ({cite('tf_steps')}).",
            f"STEPS_PER_EXECUTION = {steps_per_execution(ctx)}",
        ),
        f"MICRO_BATCH_SIZE = {p.micro_batch_size}  # batch the dataset with drop_remainder=True",
        f"# Host input: tf.data with num_parallel_calls={p.dataloader_workers} in its map and"
        " .prefetch(), so preprocessing overlaps the device. "
        + ctx.facts.phase_sentence("host_preprocess"),
        *(["# Simulated with synthetic data made on the IPU (no host pipeline, no stream). The"
           " IPUConfig options listed here have no switch for it: a tf.data dataset of random"
           " tensors in host memory comes closest, and costs its transfers, which the"
           " simulation did not count."] if ctx.synthetic else []),
        f"# 8-bit I/O {p.eight_bit_io}: "
        + (
            "feed uint8 pixels and cast and normalise in the model's first layer"
            f" ({cite('eight_bit')})."
            if p.eight_bit_io
            else f"inputs arrive as {'float16' if p.input_fp16 else 'float32'}."
        ) if ctx.runs("plan.eight_bit_io") else ctx.not_run("plan.eight_bit_io"),
    ]


class TensorFlowExporter(EveryPlan):
    """`tf_ipu_config.py`: the TensorFlow 2 IPU configuration of the plan (valid Python)."""

    name = "tensorflow"
    file_name = "tf_ipu_config.py"
    label = "TensorFlow 2 config"
    schedules = TENSORFLOW

    def render(self, ctx: ExportContext) -> str:
        return _program(ctx)


def _program(ctx: ExportContext) -> str:
    p = ctx.plan
    name = ctx.model_label
    problems = compile_problems(ctx, "tensorflow")
    header = docstring(
        f"TensorFlow 2 IPU configuration for {name} on {ctx.num_ipus} x {ctx.ipu}"
        f" ({ctx.layout_text}), {p.mode},"
        f" precision {p.precision}.",
        *ctx.stand_in_lines(TENSORFLOW),
        "Generated by ipu-tune from a simulated plan; needs Graphcore's TensorFlow 2 (and popdist"
        " under PopRun). Import it, build and compile your Keras model inside strategy.scope()"
        " after configure_keras_model(model), with steps_per_execution=STEPS_PER_EXECUTION. "
        + ctx.facts.summary(),
        *(["WARNING: " + "; ".join(problems)] if problems else []),
    )
    imports = ["from tensorflow.python import ipu"]
    if ctx.host_instances > 1:
        imports += [
            "from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy",
            "",
            "import popdist",
            "import popdist.tensorflow",
        ]
    lines = [
        *header,
        *poprun_lines(ctx, "python your_keras_program.py"),
        *imports,
        "",
        *_system_lines(ctx),
        *_keras_lines(ctx),
        f"# Precision {p.precision}: set your Keras layers' dtype policy ({cite('precision')}).",
        *tf_fold_lines(ctx),
        *tf_serialize_lines(ctx),
    ]
    return program(lines)
