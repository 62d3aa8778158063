"""One real training step on the CPU, for a model the meta device cannot run.

A model that computes with a tensor's value fails on the meta device, which has shapes and no
values (unless `_usual_values` answers the read): XLM's and FlauBERT's `lengths.max().item()`,
I-BERT's quantisation scale, a mixture of experts' data-dependent `nonzero` routing (Switch
Transformers, NLLB-MoE, JetMoE), a factory's `if x.sum() > 0`. Such a model runs its one traced
step on the CPU instead, with real weights (seeded, so that a routing is the same each time)
and the usual input: token ids that are no special token (no padding, no mask token), pixels
of zero. The tracer counts the same ops on either device; only what the values decide (which
experts a token reaches) is that input's.

The weights and their gradients take 8 bytes per parameter in fp32; a model whose step would
need more than a quarter of this machine's memory is not tried, and the refusal says so. The
step's other allocations (activations at a long sequence) are bounded by the same share where
the OS lets a process bound its address space (`bounded_memory`): beyond it an allocation
fails, and the model is refused in one line, instead of the machine swapping or its OOM killer
ending the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor, nn

__all__ = ["bounded_memory", "cpu_example", "cpu_step_refusal", "fails_on_meta", "seeded"]

_BYTES_PER_PARAMETER = 8  # an fp32 weight and its gradient
_SHARE_OF_MEMORY = 4  # a step may take at most 1 / this of the machine's memory
_ASSUMED_MEMORY_BYTES = 16 * 2**30  # where the OS does not say (os.sysconf)


def fails_on_meta(exc: BaseException) -> bool:
    """Whether a failure is the meta device's (it names it: `.item()` on a meta tensor,
    `nonzero`'s register_meta, a copy out of a meta tensor), not the model's on any device."""
    return "meta" in str(exc).lower()


def _memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return _ASSUMED_MEMORY_BYTES


def cpu_step_refusal(model: nn.Module) -> str | None:
    """Why `model`'s step is not tried on the CPU (its weights and gradients would take more
    than `1 / _SHARE_OF_MEMORY` of this machine's memory), else None."""
    parameters = sum(p.numel() for p in model.parameters())
    need = parameters * _BYTES_PER_PARAMETER
    limit = _memory_bytes() // _SHARE_OF_MEMORY
    if need <= limit:
        return None
    return (f"a step on the CPU was not tried: its {parameters:,} parameters need "
            f"{need / 1e9:,.2f} GB of fp32 weights and gradients, more than a quarter of this "
            f"machine's memory ({limit * _SHARE_OF_MEMORY / 1e9:,.2f} GB)")


def _special_ids(config: object) -> set[int]:
    """The token ids a config names (pad, bos, eos, mask, ...: `*_token_id`, XLM's
    `*_index`)."""
    ids: set[int] = set()
    for name, value in vars(config).items():
        if (name.endswith("_token_id") or name.endswith("_index")) and isinstance(value, int):
            ids.add(value)
        elif name.endswith("_token_id") and isinstance(value, list):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def usual_token_id(model: nn.Module) -> int:
    """The lowest token id that is no special token of the model's config (0 without one)."""
    config = getattr(getattr(model, "hf_model", model), "config", None)
    if config is None:
        return 0
    special = _special_ids(config)
    return next(i for i in range(len(special) + 1) if i not in special)


def cpu_example(model: nn.Module, input_kind: str, example: Tensor) -> Tensor:
    """The CPU input of the meta `example`'s shape: usual token ids, each sequence ending in
    the config's end token as a tokenizer ends it (BART's classifier reads the hidden state
    there and refuses a sequence without one), else zeros."""
    if input_kind != "tokens":
        return torch.zeros(example.shape, dtype=example.dtype)
    ids = torch.full(example.shape, usual_token_id(model), dtype=example.dtype)
    config = getattr(getattr(model, "hf_model", model), "config", None)
    eos = getattr(config, "eos_token_id", None)
    eos = eos[0] if isinstance(eos, list) and eos else eos
    if isinstance(eos, int) and ids.dim() > 0 and ids.shape[-1] > 1:
        ids[..., -1] = eos
    return ids


@contextmanager
def seeded() -> Iterator[None]:
    """The same weights and dropout each time, the caller's random state untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


def _address_space_bytes() -> int:
    """The address space this process maps now (Linux's /proc/self/statm, in pages)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[0]) * int(os.sysconf("SC_PAGE_SIZE"))


@contextmanager
def bounded_memory() -> Iterator[None]:
    """Inside, an allocation past the address space mapped now plus the step's share of the
    machine's memory fails (torch: RuntimeError "can't allocate memory"; Python: MemoryError).
    Without /proc or `resource` (not Linux), unbounded."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = _address_space_bytes() + _memory_bytes() // _SHARE_OF_MEMORY
    except (ImportError, OSError, ValueError):
        yield
        return
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
