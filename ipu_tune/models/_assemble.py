"""Group traced ops into pipeline blocks and build the per-sample `ModelProfile`."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from torch import nn

from ipu_tune.errors import IpuTuneError
from ipu_tune.models._profile import BlockProfile, ModelProfile, OpProfile
from ipu_tune.models._trace import BATCH, Trace

__all__ = ["BlockSpec", "assemble", "default_blocks", "resolve_blocks"]

# A block is a module name where a pipeline stage may begin, or (name, first module) when the
# block is named after one module but begins at an earlier one (ResNet's head: `fc` from avgpool).
BlockSpec = str | tuple[str, str]

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def default_blocks(model: nn.Module) -> list[BlockSpec]:
    """Blocks of a model that does not declare `pipeline_blocks`: its top-level children, with
    containers (Sequential, ModuleList, ModuleDict) opened up, as PopTorch users split models."""
    names: list[BlockSpec] = []

    def walk(prefix: str, module: nn.Module) -> None:
        for child_name, child in module.named_children():
            path = f"{prefix}.{child_name}" if prefix else child_name
            if isinstance(child, _CONTAINERS):
                walk(path, child)
            else:
                names.append(path)

    walk("", model)
    return names


def resolve_blocks(
    specs: Sequence[BlockSpec], trace: Trace, *, strict: bool
) -> list[tuple[str, int]]:
    """(block name, index of its first op), in execution order.

    `strict`: the model declared its blocks, so a name that never runs or runs out of order is an
    error; otherwise (derived blocks) such names are dropped.
    """
    found: list[tuple[str, int]] = []
    for spec in specs:
        name, first_module = (spec, spec) if isinstance(spec, str) else spec
        start = trace.module_order.get(first_module)
        if start is None:
            if strict:
                raise IpuTuneError(
                    f"pipeline block {name!r}: module {first_module!r} runs no op in forward"
                )
            continue
        found.append((name, start))
    if strict:
        for (a, sa), (b, sb) in itertools.pairwise(found):
            if sb <= sa:
                raise IpuTuneError(
                    f"pipeline blocks {a!r} and {b!r}: not in execution order (ops {sa} and {sb})"
                )
    else:
        found.sort(key=lambda item: item[1])
        dedup: list[tuple[str, int]] = []
        for name, start in found:
            if not dedup or start > dedup[-1][1]:
                dedup.append((name, start))
        found = dedup
    if not found:
        found = [("model", 0)]
    # Ops before the first block (input normalisation, say) belong to the first block.
    found[0] = (found[0][0], 0)
    return found


def _per_sample(n: int) -> int:
    return round(n / BATCH)


def _liveness(trace: Trace, n_ops: int) -> tuple[list[int], list[int]]:
    """Inference liveness of every stored value: live[j] = elements alive while op j runs;
    cross[j] = elements written at or before op j and read after it, of the values an input
    or a weight flows into (one made from shapes alone is made again where it is read)."""
    live_diff = [0] * (n_ops + 1)
    cross_diff = [0] * (n_ops + 1)
    for v in trace.values:
        first, last = min(v.first, n_ops - 1), min(v.last, n_ops - 1)
        live_diff[first] += v.elements
        live_diff[last + 1] -= v.elements
        if last > first and v.data:
            cross_diff[first] += v.elements
            cross_diff[last] -= v.elements
    live, cross = [], []
    acc_live = acc_cross = 0
    for j in range(n_ops):
        acc_live += live_diff[j]
        acc_cross += cross_diff[j]
        live.append(acc_live)
        cross.append(acc_cross)
    return live, cross


def _only_reader(trace: Trace, j: int) -> str:
    """The name of the op that alone reads op `j`'s output ("" when none or several do)."""
    vi = trace.records[j].output_value
    if vi is None:
        return ""
    value = trace.values[vi]
    if value.first_read < 0 or value.first_read != value.last:
        return ""
    return trace.records[value.first_read].name


def _op(trace: Trace, j: int, block: int, extra_parameters: int) -> OpProfile:
    """Op `j` of the trace, per sample."""
    r = trace.records[j]
    # A leaf module's op is named after the module (a torch function's after its module too,
    # with the function's name appended): only the former has a class.
    leaf = r.name == r.module
    mm_flops, m, k, n, rhs, groups = r.mm
    return OpProfile(
        name=r.name,
        kind=r.kind,
        block=block,
        forward_flops=r.forward_flops / BATCH,
        backward_flops=r.backward_flops / BATCH,
        parameters=r.parameters + extra_parameters,
        output_elements=_per_sample(r.output_elements),
        saved_elements=_per_sample(r.saved_elements),
        m_per_sample=_per_sample(m) if mm_flops else 0,
        k=k if mm_flops else 0,
        n=n if mm_flops else 0,
        rhs_per_sample=rhs / BATCH if mm_flops else 0.0,
        module_class=trace.module_classes.get(r.module, "") if leaf else "",
        only_reader=_only_reader(trace, j),
        groups=groups if mm_flops else 1,
    )


def _block(name: str, first: int, last: int, block_ops: list[OpProfile], crossing: int,
           max_live: int) -> BlockProfile:
    return BlockProfile(
        name=name,
        first_op=first,
        last_op=last,
        forward_flops=sum(o.forward_flops for o in block_ops),
        backward_flops=sum(o.backward_flops for o in block_ops),
        parameters=sum(o.parameters for o in block_ops),
        output_elements=_per_sample(crossing),
        saved_elements=sum(o.saved_elements for o in block_ops),
        max_live_elements=_per_sample(max_live),
    )


def assemble(
    trace: Trace,
    blocks: list[tuple[str, int]],
    *,
    name: str,
    input_shape: tuple[int, ...],
    input_kind: str,
    sample_bytes: int,
    preprocess_s_per_sample: float | None,
    torch_version: str,
    input_source: str = "dataset",
    sequences_per_pack: float = 1.0,
    paired_tokens: int = 0,
) -> ModelProfile:
    n_ops = len(trace.records)
    assert n_ops > 0, "the model ran no op"
    # Parameters never read in forward (an unused pooler, say) still live on the IPU: charge
    # them to the first op of their module, else to the first op.
    extra = [0] * n_ops
    for module, count in trace.unused_parameters.items():
        extra[trace.module_order.get(module, 0)] += count
    live, cross = _liveness(trace, n_ops)
    starts = [s for _, s in blocks]
    ends = [*starts[1:], n_ops]
    ops: list[OpProfile] = []
    stats: list[BlockProfile] = []
    for b, ((block_name, first), last) in enumerate(zip(blocks, ends, strict=True)):
        block_ops = [_op(trace, j, b, extra[j]) for j in range(first, last)]
        ops.extend(block_ops)
        crossing = trace.output_elements if b == len(blocks) - 1 else cross[last - 1]
        stats.append(_block(block_name, first, last, block_ops, crossing,
                            max(live[first:last])))
    return ModelProfile(
        name=name,
        input_shape=input_shape,
        num_classes=trace.num_classes,
        input_kind=input_kind,
        ops=tuple(ops),
        block_stats=tuple(stats),
        sample_bytes=sample_bytes,
        preprocess_s_per_sample=preprocess_s_per_sample,
        torch_version=torch_version,
        input_source=input_source,
        sequences_per_pack=sequences_per_pack,
        paired_tokens=paired_tokens,
    )
