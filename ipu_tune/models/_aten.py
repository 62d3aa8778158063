"""Aten-level facts for the tracer: op kinds, FLOP counts, matmul views, fast meta kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_leaves, tree_map
from torch.utils.flop_counter import conv_flop_count, flop_registry

from ipu_tune.models._usual_values import USUAL_VALUE_KERNELS

__all__ = [
    "ALIAS_OPS",
    "FAST_META",
    "FAST_META_KERNELS",
    "KIND_RANK",
    "META_KERNELS",
    "aten_kind",
    "count_flops",
    "cpu_on_meta",
    "first_tensor",
    "matmul_view",
    "module_kind",
]

# Ops whose output aliases an input although their schema does not say so.
ALIAS_OPS = frozenset({"_unsafe_view", "lift_fresh", "alias", "_reshape_alias", "detach"})
# Data movement and tensor creation: no arithmetic, counted as kind "other".
_MOVE_OPS = frozenset(
    {
        "cat", "stack", "clone", "copy", "to_copy", "index", "index_select", "gather",
        "scatter", "constant_pad_nd", "zeros", "zeros_like", "ones", "ones_like", "empty",
        "empty_like", "empty_strided", "full", "full_like", "fill", "new_zeros", "new_ones",
        "new_empty", "new_full", "arange", "slice_scatter", "select_scatter", "repeat",
        "expand_copy", "flip", "roll", "lift_fresh_copy", "split_with_sizes_copy",
    }
)  # fmt: skip
# Record kind = the highest-ranked kind among its forward aten ops (a Linear is a matmul even
# though it also runs a view; cross-entropy is a loss although it runs a log-softmax).
KIND_RANK = ("loss", "conv", "matmul", "embedding", "norm", "softmax", "pool", "elementwise")
_MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "mv", "addmv",
                         "grouped_mm"})


# Leaf module classes whose kind is clear from the class, whatever aten ops they lower to
# (an adaptive average pool runs as a mean on some backends).
_MODULE_KINDS = (
    ((nn.modules.conv._ConvNd,), "conv"),
    ((nn.Linear, nn.Bilinear), "matmul"),
    ((nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm), "norm"),
    ((nn.Embedding, nn.EmbeddingBag), "embedding"),
    ((nn.Softmax, nn.LogSoftmax), "softmax"),
    ((nn.modules.pooling._MaxPoolNd, nn.modules.pooling._AvgPoolNd,
      nn.modules.pooling._AdaptiveAvgPoolNd, nn.modules.pooling._AdaptiveMaxPoolNd), "pool"),
    ((nn.modules.loss._Loss,), "loss"),
)  # fmt: skip


def module_kind(module: nn.Module) -> str | None:
    for classes, kind in _MODULE_KINDS:
        if isinstance(module, classes):
            return kind
    return None


def first_tensor(out: Any) -> Tensor | None:
    for leaf in tree_leaves(out):
        if isinstance(leaf, Tensor):
            return leaf
    return None


def aten_kind(op_name: str) -> str:
    """OP_KINDS class of one aten op (by its overload packet name)."""
    n = op_name.strip("_")
    if "conv" in n:
        return "conv"
    if n in _MATMUL_OPS or "scaled_dot_product" in n or "attention" in n:
        return "matmul"
    if "loss" in n:
        return "loss"
    if "norm" in n:
        return "norm"
    if "embedding" in n:
        return "embedding"
    if "softmax" in n:
        return "softmax"
    if "pool" in n:
        return "pool"
    if n in _MOVE_OPS:
        return "other"
    return "elementwise"


def matmul_view(
    name: str, args: tuple[Any, ...], out: Any, flops: int, is_weight: Callable[[Tensor], bool],
) -> tuple[int, int, int, int, int]:
    """(m for the batch, k, n, rhs, groups) of a conv (im2col view) or matmul aten call. rhs:
    how many K x N second operands a batched matmul multiplies when its second operand is an
    activation (attention's keys and values: batch x heads of them); 0 where it is one weight
    (`is_weight`) that every row shares, as in a conv or a Linear. groups: a convolution's
    (`aten.convolution`'s last argument), else 1."""
    n_ = name.strip("_")
    res = first_tensor(out)
    if "conv" in n_ and res is not None and res.dim() >= 3:
        m = res.shape[0] * int(torch.Size(res.shape[2:]).numel())
        n = int(res.shape[1])
        groups = args[8] if len(args) > 8 and type(args[8]) is int and args[8] >= 1 else 1
        # K = C_in/groups * kernel area; derived from the FLOP count so that grouped and
        # transposed convolutions also satisfy 2*m*k*n = FLOPs.
        return m, round(flops / (2 * m * n)) if m * n else 0, n, 0, groups
    mats = [a for a in args if isinstance(a, Tensor) and a.dim() >= 2]
    if len(mats) >= 2:
        a, b = mats[-2], mats[-1]
        batch = int(torch.Size(a.shape[:-2]).numel())
        rhs = 0 if b.dim() == 2 or is_weight(b) else int(torch.Size(b.shape[:-2]).numel())
        return batch * int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1]), rhs, 1
    return 0, 0, 0, 0, 1


# On the meta device only shapes, dtypes and strides exist. torch's meta kernel for training
# BatchNorm is its Python decomposition (~30 elementwise prims per call, forward and backward),
# two thirds of the time of tracing a ResNet; these give the same outputs' metadata directly.
# Autograd's saved tensors are decided above this level, so nothing recorded changes (tested).
FAST_META_KERNELS = True  # off: torch's own meta kernels (tests compare)


def _bn_stat(x: Tensor, c: int) -> Tensor:
    return torch.empty(c, dtype=x.dtype, device=x.device)


def _fast_bn(*args: Any) -> Any:
    x, w, _, _, _, training = args[:6]
    if not training or w is None or x.dtype != torch.float32 or x.device.type != "meta":
        return None
    c = x.shape[1]
    return torch.empty_like(x), _bn_stat(x, c), _bn_stat(x, c)


def _fast_bn_backward(*args: Any) -> Any:
    x, w = args[1], args[2]
    train, mask = args[7], args[9]
    if not train or w is None or x.dtype != torch.float32 or x.device.type != "meta":
        return None
    return (
        torch.empty_like(x) if mask[0] else None,
        torch.empty_like(w) if mask[1] else None,
        torch.empty_like(w) if mask[2] else None,
    )


FAST_META: dict[Any, Callable[..., Any]] = {
    torch.ops.aten.native_batch_norm.default: _fast_bn,
    torch.ops.aten.native_batch_norm_backward.default: _fast_bn_backward,
}


def grouped_mm_meta(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A grouped matmul (Transformers' mixture-of-experts layers: each token-expert pair's row
    times its expert's matrix) on the meta device in any float type. torch's meta kernel
    enforces CUDA's kernel rule, bf16 only; the meta device computes nothing, so the shapes are
    those of the same call in bf16. None: not on the meta device, or already bf16."""
    a, b = args[0], args[1]
    if a.device.type != "meta" or a.dtype == b.dtype == torch.bfloat16:
        return None
    out = func(a.to(torch.bfloat16), b.to(torch.bfloat16), *args[2:], **kwargs)
    return torch.empty_like(out, dtype=a.dtype)


# Ops the meta device runs with a kernel of ours whatever FAST_META_KERNELS says (values the
# meta device has not: `_usual_values`).
META_KERNELS: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    torch.ops.aten._grouped_mm.default: grouped_mm_meta,
    **USUAL_VALUE_KERNELS,
}


def cpu_on_meta(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """(args, kwargs) with their CPU tensors on the meta device, for an op that mixes the two
    and failed; None if it mixes none. A model makes a few tensors on the CPU whatever device it
    runs on (`torch.tensor(finfo.min)`, a mask of `torch.ones(n)`); on an accelerator a CPU
    scalar joins a device op, and the model would make the rest there: the meta device is the
    device here. Only called once an op has failed, so the common path pays nothing."""
    leaves = [t for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
    if not any(t.is_meta for t in leaves) or all(t.is_meta for t in leaves):
        return None
    moved = tree_map(lambda t: t.to("meta") if isinstance(t, Tensor) and t.device.type == "cpu"
                     else t, (args, kwargs))  # fmt: skip
    return moved[0], moved[1]


def _grouped_mm_flops(args: tuple[Any, ...]) -> int:
    # Each row of the first operand meets exactly one group's matrix, whatever the routing
    # (offs): 2 x rows x inner x outer, the multiply-adds of the rows' own matmuls. The same
    # holds for the weight gradient's call, whose first operand is the inputs transposed.
    a, b = args[0], args[1]
    return 2 * a.numel() * int(b.shape[-1])


def count_flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """FLOPs of one aten call by the counting functions of torch's FlopCounterMode.

    One correction: torch's `conv_backward_flop` sizes the weight gradient of a grouped
    convolution as if it were dense (it passes the batch as the input-channel count and never
    divides by `groups`), 32x too much for ResNeXt's 3x3s. The weight gradient has exactly the
    forward pass's multiply-accumulates (Chetlur et al. 2014, "cuDNN", section 2), so it is
    counted with the forward formula, which does honour groups through the weight shape.
    """
    packet = func._overloadpacket
    if packet is torch.ops.aten._grouped_mm:
        return _grouped_mm_flops(args)
    count = flop_registry.get(packet)
    if count is None:
        return 0
    if packet is torch.ops.aten.convolution_backward and args[9] != 1 and args[10][1]:
        grad_out, x, w, transposed = args[0], args[1], args[2], args[7]
        mask = [args[10][0], False, args[10][2]]
        rest = (*args[:10], mask, *args[11:])
        dgrad = int(count(*rest, **kwargs, out_val=out))
        wgrad = conv_flop_count(list(x.shape), list(w.shape), list(grad_out.shape), transposed)
        return dgrad + int(wgrad)
    return int(count(*args, **kwargs, out_val=out))
