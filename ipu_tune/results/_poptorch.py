"""A PopTorch program skeleton that runs a plan: `poptorch.Options` for every knob, with why.

Sources of the PopTorch names used: the seed ResNet-101 hands-on session (BeginBlock placement,
precision, ModelWithNormalization for 8-bit I/O, fp16 optimizer accumulators, DataLoaderMode),
the seed pipelining tutorial (PipelinedExecution / ShardedExecution, TensorLocationSettings for
offloading), and the seed memory/performance guide ch. 4 (defaultPrefetchBufferingDepth, I/O
tiles, replicated tensor sharding). The "why" comments quote the simulated result when given.
"""

from __future__ import annotations

import json
import keyword
import textwrap

from ipu_tune.config import EvalConfig
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.simulator import SimResult

from ._snippet_parts import Facts, input_lines, model_lines, optimizer_lines

__all__ = ["module_access", "poptorch_snippet"]

_WIDTH = 99  # PEP 8 / ruff line length of the generated file


def _top_level_args(args: str) -> list[str]:
    """Split a call's argument text at the commas outside brackets and quotes."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(args):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    parts.append(args[start:].strip())
    return parts


def _wrap(lines: list[str]) -> list[str]:
    """Wrap long comments and calls so the snippet reads like hand-written code."""
    out: list[str] = []
    for line in lines:
        indent = line[: len(line) - len(line.lstrip())]
        body = line.strip()
        if len(line) <= _WIDTH:
            out.append(line)
        elif body.startswith("# "):
            out += textwrap.wrap(
                body[2:],
                _WIDTH - len(indent) - 2,
                initial_indent=indent + "# ",
                subsequent_indent=indent + "# ",
                break_on_hyphens=False,
            )
        elif body.endswith(")") and "(" in body and ", " in body:
            # One argument per line: `f(a, b=1)` -> `f(\n    a,\n    b=1,\n)`.
            head, _, args = body[:-1].partition("(")
            out.append(f"{indent}{head}(")
            out += [f"{indent}    {arg}," for arg in _top_level_args(args)]
            out.append(f"{indent})")
        else:
            out.append(line)
    return out


def _is_name(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def module_access(path: str, root: str = "model") -> str:
    """Python expression of a torch submodule: 'layer3.8' -> 'model.layer3[8]'."""
    expr = root
    for part in path.split("."):
        if part.isdigit():
            expr += f"[{int(part)}]"  # nn.Sequential / nn.ModuleList child
        elif _is_name(part):
            expr += f".{part}"
        else:
            expr = f"getattr({expr}, {part!r})"
    return expr


def _begin_block(path: str, ipu: int) -> str:
    """`model.layer3[8] = poptorch.BeginBlock(model.layer3[8], ipu_id=1)` (seed hands-on)."""
    parent, _, last = path.rpartition(".")
    if last.isdigit() or _is_name(last):
        target = module_access(path)
        return f"{target} = poptorch.BeginBlock({target}, ipu_id={ipu})"
    owner = module_access(parent) if parent else "model"
    return (
        f"setattr({owner}, {last!r}, poptorch.BeginBlock(getattr({owner}, {last!r}), ipu_id={ipu}))"
    )


def _pipeline_lines(plan: ExecutionPlan, facts: Facts) -> list[str]:
    if plan.stages == 1:
        return ["# One stage: the whole model on one IPU per replica, no pipelining."]
    out = [
        f"# {plan.stages} pipeline stages; each split begins a stage on the next IPU. "
        f"{facts.stage_balance()}"
    ]
    out += [_begin_block(split, ipu) for ipu, split in enumerate(plan.splits, start=1)]
    if plan.schedule == "sharded":
        out += [
            "# Schedule: sharded, one stage at a time (poptorch.ShardedExecution): "
            + facts.why_sharded(),
            "opts.setExecutionStrategy(poptorch.ShardedExecution(poptorch.AutoStage.SameAsIpu))",
        ]
        return out
    if plan.schedule == "interleaved":
        out.append(
            "# Schedule: interleaved, N+1 activation FIFOs per stage instead of 2N+1 on the"
            ' first IPU (seed guide 4.2). PopTorch has no public switch for it ("these pipeline'
            " schedule options may not be available in all frameworks\"): PopART's default"
            " schedule runs below, so recheck the first IPU's memory. " + facts.headroom_sentence()
        )
    else:
        out.append(
            "# Schedule: grouped, PopART's default (seed guide 4.2: generally faster, stashes"
            " 2N+1 activations on the first IPU)."
        )
    out.append(
        "opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu))"
    )
    return out


def _checkpoint_lines(blocks: list[str]) -> list[str]:
    """A `poptorch.recomputationCheckpoint` on the input of each named block."""
    out = [
        "# A recomputation checkpoint on the input of every block after the first (the previous"
        " block's output): only the activations between two checkpoints are recomputed.",
    ]
    if blocks:
        out += [
            "checkpoints = [",
            *textwrap.wrap(
                ", ".join(json.dumps(b) for b in blocks) + ",",
                _WIDTH - 4,
                initial_indent="    ",
                subsequent_indent="    ",
                break_long_words=False,
                break_on_hyphens=False,
            ),
            "]",
        ]
    else:
        out += [
            "# No model profile was given and there are no splits: list the module names.",
            "checkpoints: list[str] = []",
        ]
    return [
        *out,
        "for name in checkpoints:",
        "    model.get_submodule(name).register_forward_pre_hook(",
        "        lambda _module, args: poptorch.recomputationCheckpoint(*args)",
        "    )",
    ]


def _recompute_lines(plan: ExecutionPlan, profile: ModelProfile | None, facts: Facts) -> list[str]:
    if plan.recompute == "auto" and plan.training:
        # PopTorch's own default: it sets autoRecomputation=Pipeline when pipelined (Compiler.cpp).
        what = "pipeline recomputation (PopTorch sets it)" if plan.stages > 1 else "none"
        return [f"# Recomputation: auto = PopTorch's default, here {what}; nothing to set."]
    if plan.recompute in ("none", "auto") or not plan.training:
        # What recomputation would shrink: the pipeline's stash, or one stage's activations.
        held = "activation_stash" if plan.stages > 1 else "activations"
        return [f"# Recomputation: none. {facts.category_sentence(held)}"]
    pipelined = plan.stages > 1
    # PopART RecomputationType: 1 Standard, 3 Pipeline (recompute each stage's forward from its
    # stashed input, i.e. checkpoints at the stage boundaries), 4 RecomputeAll.
    mode = 3 if pipelined else (1 if plan.recompute == "checkpoints" else 4)
    out = [
        f"# Recomputation: {plan.recompute}; stores checkpoints instead of every activation"
        f" at the cost of a second forward. {facts.recompute_sentence()}",
        f'opts._Popart.set("autoRecomputation", {mode})',
    ]
    if plan.recompute == "every_block":
        out += _checkpoint_lines(profile.blocks[1:] if profile is not None else list(plan.splits))
    return out


def _tensor_location_lines(plan: ExecutionPlan, facts: Facts) -> list[str]:
    lines = [
        f"# Optimizer state offloaded to streaming memory: {plan.offload_optimizer_state}. "
        + facts.offload_sentence(plan.offload_optimizer_state),
        f"# Replicated tensor sharding: {plan.replicated_tensor_sharding}. "
        + facts.rts_sentence(plan),
    ]
    if not plan.offload_optimizer_state and not plan.replicated_tensor_sharding:
        return lines
    chain = ["    poptorch.TensorLocationSettings()"]
    if plan.offload_optimizer_state:
        chain.append("    .useOnChipStorage(False)")
    if plan.replicated_tensor_sharding:
        chain += [
            f"    .minElementsForReplicatedTensorSharding({plan.replication_factor})",
            "    .useReplicatedTensorSharding(True)",
        ]
    return [*lines, "opts.TensorLocations.setOptimizerLocation(", *chain, ")"]


def _io_lines(plan: ExecutionPlan, facts: Facts) -> list[str]:
    out = [
        f"# Prefetch depth {plan.prefetch_depth}: the host fills stream buffers ahead of the"
        f" transfer (seed guide 4.4.1, 3 seems optimal). {facts.phase_sentence('host_io')}",
        f'opts._Popart.set("defaultPrefetchBufferingDepth", {plan.prefetch_depth})',
    ]
    if plan.io_tiles:
        overlaps = plan.stages == 1 or plan.schedule == "grouped"
        note = (
            "IpuInput below marks the input for overlap."
            if overlaps
            else "NOTE: the transfer will not overlap: overlap works on one IPU or with the"
            " grouped pipeline only (seed guide 4.4.2, SDK 2.3)."
        )
        out += [
            f"# {plan.io_tiles} I/O tiles overlap host transfers with compute (seed guide 4.4.2);"
            f" they must hold a micro-batch. {facts.category_sentence('io_tiles')}",
            f"# {note}",
            f"opts.TensorLocations.numIOTiles({plan.io_tiles})",
        ]
    else:
        out.append("# I/O tiles: 0 (no tiles taken from compute; transfers do not overlap).")
    return out


def poptorch_snippet(
    cfg: EvalConfig, result: SimResult | None = None, profile: ModelProfile | None = None
) -> str:
    """Python source configuring PopTorch for the plan in `cfg` (valid Python; needs poptorch)."""
    plan = plan_from_config(cfg)
    facts = Facts(plan, result)
    name = cfg.model.name or cfg.model._target_ or "model"
    title = (
        f"PopTorch options for {name} on {cfg.system.num_ipus} x {cfg.system.ipu}"
        f" ({plan.replication_factor} replica(s) x {plan.stages} stage(s)), {plan.mode},"
        f" precision {plan.precision}."
    )
    about = "Generated by ipu-tune from a simulated plan. " + facts.summary()
    lines = [
        '"""' + "\n".join(textwrap.wrap(title, _WIDTH - 3)),
        "",
        *textwrap.wrap(about, _WIDTH),
        '"""',
        "import torch",
        "",
        "import poptorch",
        "",
        *model_lines(cfg),
        "",
        "opts = poptorch.Options()",
        f"# Device iterations {plan.device_iterations}: one host call runs this many steps."
        f" {facts.phase_sentence('host_overhead')}",
        f"opts.deviceIterations({plan.device_iterations})",
    ]
    if plan.training:
        lines += [
            f"# Gradient accumulation {plan.gradient_accumulation}: micro-batches per weight"
            f" update; amortises the 2N-stage pipeline ramp and the weight update."
            f" {facts.ga_sentence()}",
            f"opts.Training.gradientAccumulation({plan.gradient_accumulation})",
        ]
    lines += [
        f"# Replication factor {plan.replication_factor}: data-parallel copies of the pipeline."
        f" {facts.phase_sentence('all_reduce_pod')} {facts.phase_sentence('all_reduce_gw')}",
        f"opts.replicationFactor({plan.replication_factor})",
        *_pipeline_lines(plan, facts),
        *_recompute_lines(plan, profile, facts),
        f"# Available memory proportion {plan.available_memory_proportion} on every IPU:"
        " the share of tile memory conv/matmul temporaries may take."
        f" {facts.category_sentence('temporaries')}",
        "opts.setAvailableMemoryProportion("
        f'{{f"IPU{{i}}": {plan.available_memory_proportion} for i in range({plan.stages})}})',
        *_tensor_location_lines(plan, facts),
        *_io_lines(plan, facts),
        "",
        *input_lines(cfg, plan, profile, facts),
        "",
        *optimizer_lines(cfg, plan, facts),
    ]
    return "\n".join(_wrap(lines)) + "\n"
