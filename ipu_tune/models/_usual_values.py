"""Values the meta device has not, taken as the model's usual input gives them.

A meta tensor has shapes and no values, so `.item()`, `bool(t)` and `if t.any():` fail on it.
Models read a value this way mostly to test a whole tensor, not to compute with it:
`if not torch.isfinite(x).all(): ...` (a guard that clamps or raises), `if not
padding_mask.any(): padding_mask = None` (skip the mask of an unpadded batch),
`is_global_attn = mask.any().item()` (Longformer's global tokens), torch.distributions'
argument checks. On the usual input, a batch of real tokens or pixels without padding, NaN or
special tokens, every such test answers the same way: an `all` over the tensor is True, an
`any` is False.

So the one-element result of `all` and `any` on the meta device carries that answer, and its
`.item()` returns it; any other value read still fails, and the profiler refuses the model in
one line. No op is added or skipped beyond what the model itself runs for that answer, so the
FLOPs are the model's own on such an input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["USUAL_VALUE_KERNELS"]

_ATTR = "_ipu_tune_usual_value"


def _tagged(answer: bool) -> Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]:
    def kernel(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = func(*args, **kwargs)
        if isinstance(out, Tensor) and out.device.type == "meta" and out.numel() == 1:
            setattr(out, _ATTR, answer)
        return out

    return kernel


def _item(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`.item()` of a meta tensor that `all` or `any` made: its usual answer; else None (the
    meta kernel runs and refuses)."""
    return getattr(args[0], _ATTR, None)


_aten = torch.ops.aten
USUAL_VALUE_KERNELS: dict[Any, Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]] = {
    **{getattr(_aten.all, o): _tagged(True) for o in ("default", "dim", "dims")},
    **{getattr(_aten.any, o): _tagged(False) for o in ("default", "dim", "dims")},
    _aten._is_all_true.default: _tagged(True),  # torch._check_tensor_all: a check passes
    _aten._is_any_true.default: _tagged(False),
    _aten._local_scalar_dense.default: _item,
}
