"""`tf_ipu_config.py`: TensorFlow 2's `IPUConfig` and the Keras pipeline arguments of a plan.

Names as Graphcore's TensorFlow 2.6 port and IPU Keras spell them (framework-apis.md section 3:
tensorflow/python/ipu/config.py, ops/pipelining_ops.py, ipu_infeed_queue.py and
keras/ipu/extensions/functional_extensions.py, SDK 3.4). The Keras model is the user's: the
program configures the IPU system and a `configure_keras_model(model)` to call on it.
"""

from __future__ import annotations

from ipu_tune.config import EvalConfig
from ipu_tune.simulator import SimResult

from ._docs import cite
from ._model_source import literal, module_path
from ._plan_view import ExportPlan, compile_problems, export_plan, model_label
from ._poprun import poprun_lines
from ._snippet_parts import Facts
from ._source import docstring, knob, wrap

__all__ = ["steps_per_execution", "tf_snippet"]

# ipu-tune schedule -> ipu.pipelining_ops.PipelineSchedule (Sequential runs one stage at a time).
_SCHEDULES = {"grouped": "Grouped", "interleaved": "Interleaved", "sharded": "Sequential"}


def steps_per_execution(xp: ExportPlan) -> int:
    """Keras steps per execution: device iterations x accumulation (a multiple of the latter)."""
    return xp.plan.device_iterations * (xp.plan.gradient_accumulation if xp.plan.training else 1)


def _allow_recompute(xp: ExportPlan) -> bool:
    """Recomputation on: `auto` means PopTorch's default, which recomputes a pipeline."""
    if not xp.plan.training or xp.recompute == "none":
        return False
    return xp.recompute != "auto" or xp.stages > 1


def _system_lines(xp: ExportPlan, facts: Facts) -> list[str]:
    p = xp.plan
    amp = f"{p.available_memory_proportion:g}"
    options = f'{{"availableMemoryProportion": "{amp}", "partialsType": "{xp.partials}"}}'
    ipus = xp.stages * p.replication_factor
    select = knob(
        f"{ipus} IPUs: {xp.stages} per replica x {p.replication_factor} replicas; Keras"
        " replicates a model over the IPUs it does not use itself"
        f" ({cite('tf_replication')}). {facts.all_reduce_sentence()}",
        f"cfg.auto_select_ipus = {ipus}",
    )
    if xp.host_instances > 1:
        select = [
            f"# {xp.host_instances} PopRun instances ({cite('popdist')}; {cite('tf_popdist')}):"
            " under poprun, popdist picks this instance's IPUs and replicas.",
            "if popdist.isPopdistEnvSet():",
            f"    popdist.tensorflow.set_ipu_config(cfg, ipus_per_replica={xp.stages},"
            " configure_device=True)",
            "else:",
            *(f"    {line}" for line in select),
        ]
    out = [
        "cfg = ipu.config.IPUConfig()",
        *select,
        *knob(
            f"Available memory proportion {amp} and partials {xp.partials} for every matmul and"
            f" convolution ({cite('amp')}; {cite('partials')}); values are strings."
            f" {facts.category_sentence('temporaries')}",
            f"cfg.matmuls.poplar_options = {options}",
            f"cfg.convolutions.poplar_options = {options}",
        ),
        *knob(
            f"Recomputation {xp.recompute}: allow_recompute={_allow_recompute(xp)}"
            f" ({cite('tf_recompute')}).",
            f"cfg.allow_recompute = {_allow_recompute(xp)}",
        ),
    ]
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
    if xp.host_instances > 1:
        return [
            *out,
            "if popdist.isPopdistEnvSet():",
            "    strategy = PopDistStrategy()",
            "else:",
            "    strategy = ipu.ipu_strategy.IPUStrategy()",
        ]
    return [*out, "strategy = ipu.ipu_strategy.IPUStrategy()"]


def _pipeline_args(xp: ExportPlan) -> list[str]:
    p = xp.plan
    args = [
        f"gradient_accumulation_steps_per_replica={p.gradient_accumulation}",
        f"device_mapping={literal(list(range(xp.stages)))}",
        f"pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.{_SCHEDULES[p.schedule]}",
    ]
    if _allow_recompute(xp):
        args.append("recomputation_mode=ipu.pipelining_ops.RecomputationMode.Auto")
    return args


def _state_args(xp: ExportPlan) -> list[str]:
    p = xp.plan
    return [
        f"offload_weight_update_variables={p.offload_optimizer_state}",
        f"replicated_optimizer_state_sharding={p.replicated_tensor_sharding}",
    ]


def _keras_lines(cfg: EvalConfig, xp: ExportPlan, facts: Facts) -> list[str]:
    p = xp.plan
    body: list[str] = []
    if xp.stages > 1:
        starts = [module_path(cfg, s) for s in p.splits]
        body += [
            f"    # {xp.stages} pipeline stages ({cite('tf_pipeline')}): put the layers of stage s"
            " under `with keras.ipu.PipelineStage(s):` or set them with"
            " model.set_pipeline_stage_assignment(...); stage s begins at the layer matching"
            f" torch module {literal(starts)}[s - 1]. {facts.stage_balance()}",
        ]
        if p.training:
            body += [
                f"    # Gradient accumulation {p.gradient_accumulation} per replica"
                f" ({cite('tf_ga')}); optimizer state offload {p.offload_optimizer_state}"
                f" ({cite('tf_offload')}) and sharding {p.replicated_tensor_sharding}"
                f" ({cite('tf_rts')}). {facts.ga_sentence()}",
                "    model.set_pipelining_options("
                + ", ".join(_pipeline_args(xp) + _state_args(xp))
                + ")",
            ]
        else:
            body.append(
                "    model.set_pipelining_options("
                f"device_mapping={literal(list(range(xp.stages)))}, pipeline_schedule="
                f"ipu.pipelining_ops.PipelineSchedule.{_SCHEDULES[p.schedule]})"
            )
    elif p.training and (p.gradient_accumulation > 1 or p.offload_optimizer_state
                         or p.replicated_tensor_sharding):  # fmt: skip
        body += [
            f"    # Gradient accumulation {p.gradient_accumulation} per replica ({cite('tf_ga')});"
            f" optimizer state offload {p.offload_optimizer_state} ({cite('tf_offload')}) and"
            f" sharding {p.replicated_tensor_sharding} ({cite('tf_rts')}). {facts.ga_sentence()}",
            "    model.set_gradient_accumulation_options("
            f"gradient_accumulation_steps_per_replica={p.gradient_accumulation},"
            f" {', '.join(_state_args(xp))})",
        ]
    body += [
        f"    # Prefetch depth {p.prefetch_depth} of the infeed ({cite('tf_prefetch')}; allowed"
        f" 1..255). {facts.phase_sentence('host_io')}",
        f"    model.set_infeed_queue_options(prefetch_depth={p.prefetch_depth})",
    ]
    return [
        "",
        "",
        "def configure_keras_model(model) -> None:",
        '    """Call inside strategy.scope() on your Keras model, before model.compile."""',
        *body,
        "",
        "",
        *knob(
            f"model.compile(..., steps_per_execution=STEPS_PER_EXECUTION): {p.device_iterations}"
            f" device iterations x {p.gradient_accumulation if p.training else 1} accumulated"
            f" micro-batches, a multiple of the accumulation ({cite('tf_steps')}).",
            f"STEPS_PER_EXECUTION = {steps_per_execution(xp)}",
        ),
        f"MICRO_BATCH_SIZE = {p.micro_batch_size}  # batch the dataset with drop_remainder=True",
        f"# Host input: tf.data with num_parallel_calls={p.dataloader_workers} in its map and"
        " .prefetch(), so preprocessing overlaps the device. "
        + facts.phase_sentence("host_preprocess"),
        f"# 8-bit I/O {p.eight_bit_io}: "
        + (
            "feed uint8 pixels and cast and normalise in the model's first layer"
            f" ({cite('eight_bit')})."
            if p.eight_bit_io
            else f"inputs arrive as {'float16' if p.input_fp16 else 'float32'}."
        ),
    ]


def tf_snippet(cfg: EvalConfig, result: SimResult | None = None) -> str:
    """Source of `tf_ipu_config.py` for the plan of `cfg` (valid Python; needs IPU TensorFlow)."""
    xp = export_plan(cfg)
    facts = Facts(xp.plan, result)
    p = xp.plan
    name = model_label(cfg)
    problems = compile_problems(xp, "tensorflow")
    header = docstring(
        f"TensorFlow 2 IPU configuration for {name} on {xp.num_ipus} x {xp.ipu}"
        f" ({p.replication_factor} replica(s) x {xp.stages} stage(s)), {p.mode},"
        f" precision {p.precision}.",
        "Generated by ipu-tune from a simulated plan; needs Graphcore's TensorFlow 2 (and popdist"
        " under PopRun). Import it, build and compile your Keras model inside strategy.scope()"
        " after configure_keras_model(model), with steps_per_execution=STEPS_PER_EXECUTION. "
        + facts.summary(),
        *(["WARNING: " + "; ".join(problems)] if problems else []),
    )
    imports = ["from tensorflow.python import ipu"]
    if xp.host_instances > 1:
        imports += [
            "from tensorflow.python.ipu.distributed.popdist_strategy import PopDistStrategy",
            "",
            "import popdist",
            "import popdist.tensorflow",
        ]
    lines = [
        *header,
        *poprun_lines(cfg, "python your_keras_program.py"),
        *imports,
        "",
        *_system_lines(xp, facts),
        *_keras_lines(cfg, xp, facts),
        f"# Precision {p.precision}: set your Keras layers' dtype policy ({cite('precision')}).",
    ]
    return "\n".join(wrap(lines)) + "\n"
