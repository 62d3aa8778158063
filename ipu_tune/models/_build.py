"""Build a model on the meta device and trace it into a `ModelProfile` (imports torch).

Kept apart from `_profiler` so that a profile served from the cache never imports torch:
a tuner start-up that finds its profile on disk is about 2 s faster.
"""

from __future__ import annotations

import math

import torch

from ipu_tune.config import SYNTHETIC, ModelConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.models._assemble import BlockSpec, assemble, default_blocks, resolve_blocks
from ipu_tune.models._profile import ModelProfile
from ipu_tune.models._profiler import DEFAULT_SEQUENCE_LENGTH
from ipu_tune.models._trace import BATCH, trace_model
from ipu_tune.models._zoo import _one_line, build_model

__all__ = ["compute", "label"]


def label(cfg: ModelConfig) -> str:
    return f"model._target_={cfg._target_!r}" if cfg._target_ else f"model.name={cfg.name!r}"


def _block_specs(model: torch.nn.Module, cfg: ModelConfig) -> tuple[list[BlockSpec], bool]:
    declared = getattr(model, "pipeline_blocks", None)
    if declared is None:
        return default_blocks(model), False
    ok = isinstance(declared, list | tuple) and all(
        isinstance(s, str) or (isinstance(s, tuple) and len(s) == 2) for s in declared
    )
    if not ok:
        raise IpuTuneError(
            f"{label(cfg)}: pipeline_blocks must be a list of module names or "
            "(name, first module) pairs"
        )
    return list(declared), True


def compute(cfg: ModelConfig) -> ModelProfile:
    with torch.device("meta"):
        model, input_kind = build_model(cfg)
    if any(p.device.type != "meta" for p in model.parameters()):
        model = model.to("meta")  # a factory that pinned its device; profile it all the same
    if input_kind == "tokens":
        seq = cfg.sequence_length or DEFAULT_SEQUENCE_LENGTH
        input_shape: tuple[int, ...] = (seq,)
        example = torch.zeros(BATCH, seq, dtype=torch.long, device="meta")
        # Token ids, attention mask and token types as int32 (the host-side BERT input set).
        default_bytes = 4 * seq * 3
    else:
        input_shape = tuple(int(d) for d in cfg.input_shape)
        example = torch.empty(BATCH, *input_shape, device="meta")
        default_bytes = math.prod(input_shape)  # one uint8 per stored pixel value
    try:
        trace = trace_model(model, example)
    except IpuTuneError:
        raise
    except Exception as exc:
        raise IpuTuneError(
            f"{label(cfg)}: cannot run forward and backward on the meta device ({_one_line(exc)})"
        ) from None
    specs, strict = _block_specs(model, cfg)
    blocks = resolve_blocks(specs, trace, strict=strict)
    ds = cfg.dataset
    return assemble(
        trace,
        blocks,
        name=cfg._target_ or cfg.name or "model",
        input_shape=input_shape,
        input_kind=input_kind,
        sample_bytes=ds.sample_bytes if ds.sample_bytes is not None else default_bytes,
        # Synthetic data is generated on the device or already on the host: nothing to load.
        preprocess_s_per_sample=0.0 if ds.name == SYNTHETIC else ds.preprocess_s_per_sample,
        torch_version=str(torch.__version__),  # a plain str: unpickling needs no torch
    )
