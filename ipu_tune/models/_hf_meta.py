"""What a Transformers model needs to run on the meta device, where tensors have shapes and no
values.

Transformers reads tensor values in a few places that compute nothing a profile counts:
- Masks. `padding_mask.all()` (masking_utils) decides whether a mask of ones can be skipped,
  and recurrent and hybrid models test `torch.all(attention_mask == 1)` likewise. Transformers
  leaves such tests out itself when tensors have no values (`is_tracing`: torch.compile,
  torch.export, torch.fx, FakeTensor); a meta tensor has none either, so it is taken the same
  way (`meta_is_tracing`): the mask is built and applied, as it is for a padded batch.
- The padding warning (`warn_if_padding_and_no_attention_mask`) reads the token ids.
- A mixture-of-experts layer's eager loop visits the experts its tokens were routed to
  (`expert_mask.sum(...).nonzero()`), a count the values decide; its grouped matmuls do the
  same multiply-adds whatever the routing, and are what the profile counts (`grouped_experts`).
Its log while a model is configured, built and traced is not for our users either.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from torch import nn

__all__ = ["grouped_experts", "skip_padding_warning", "transformers_on_meta"]


@contextmanager
def transformers_on_meta() -> Iterator[None]:
    """Configure, build and trace a Transformers model inside this: its log is quiet (a config's
    odd token ids, "add is_decoder=True": what fails ends in one line from the profiler), and
    its value tests are left out for meta tensors (module docstring)."""
    from transformers import logging
    from transformers.utils import import_utils

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    original = import_utils.is_tracing

    def meta_is_tracing(tensor: Any = None) -> bool:
        return bool(original(tensor)) or bool(getattr(tensor, "is_meta", False))

    _rebind(original, meta_is_tracing)  # modules imported already
    import_utils.is_tracing = meta_is_tracing  # modules the build imports
    try:
        yield
    finally:
        import_utils.is_tracing = original
        _rebind(meta_is_tracing, original)
        logging.set_verbosity(verbosity)


def _rebind(old: Callable[..., Any], new: Callable[..., Any]) -> None:
    """Each loaded Transformers module that imported `old` by name now holds `new`."""
    for name, module in list(sys.modules.items()):
        if name.startswith("transformers") and getattr(module, "is_tracing", None) is old:
            module.is_tracing = new  # type: ignore[attr-defined]


def _no_padding_warning(input_ids: Any, attention_mask: Any) -> None:
    return None


def skip_padding_warning(model: nn.Module) -> None:
    """Transformers warns when token ids look padded and no mask is given, by reading their
    values (`pad_token_id in input_ids`, DeBERTa, Longformer, ...): the meta device has no
    values, and the warning computes nothing the profile counts."""
    for module in model.modules():
        if hasattr(module, "warn_if_padding_and_no_attention_mask"):
            object.__setattr__(module, "warn_if_padding_and_no_attention_mask",
                               _no_padding_warning)  # fmt: skip


def grouped_experts(model: nn.Module) -> None:
    """Run the model's mixture-of-experts layers as grouped matmuls where Transformers can
    (`@use_experts_implementation`) and the model chose its eager loop by default (OpenAI's
    privacy filter, for accumulation order): the same multiply-adds, whatever the routing."""
    config = getattr(model, "config", None)
    can_set = getattr(model, "_can_set_experts_implementation", None)
    if getattr(config, "_experts_implementation", None) == "eager" and callable(can_set) and (
            can_set()):
        model.set_experts_implementation("grouped_mm")  # type: ignore[operator]
