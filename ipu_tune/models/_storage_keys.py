"""Tensors by the storage they hold, as the tracer follows values (`_trace`)."""

from __future__ import annotations

from torch import Tensor

__all__ = ["output_key", "storage_elements", "storage_key"]


def storage_key(t: Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def output_key(t: Tensor) -> int | None:
    """`storage_key` of an op's output as a torch function returns it; None for a tensor of
    no storage: inside `torch.vmap` (Transformers builds attention masks so) a function's
    output is a batched wrapper, whose aten ops the dispatch mode sees unwrapped."""
    try:
        return storage_key(t)
    except NotImplementedError:
        return None


def storage_elements(t: Tensor) -> int:
    return int(t.untyped_storage().nbytes()) // max(1, t.element_size())
