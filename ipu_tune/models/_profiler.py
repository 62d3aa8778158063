"""`profile_model`: build on the meta device, trace, group into blocks, cache.

Two cache levels. On disk (`joblib.Memory` under ``$IPU_TUNE_CACHE_DIR`` or
``~/.cache/ipu_tune``) keyed by every field of the model config, the torch version and the
profile format, so a new process does not trace again; in process, a small LRU of finished
profiles so that the tuner's thousands of trials pay a dictionary lookup.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import joblib
import torch

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._assemble import BlockSpec, assemble, default_blocks, resolve_blocks
from ipu_tune.models._profile import ModelProfile
from ipu_tune.models._trace import BATCH, trace_model
from ipu_tune.models._zoo import _one_line, build_model, resolve_target

__all__ = ["DEFAULT_SEQUENCE_LENGTH", "PROFILE_FORMAT", "cache_dir", "clear_memory_cache",
           "profile_model"]  # fmt: skip

# Bump when what the profiler records changes, so that old disk entries are not reused.
PROFILE_FORMAT = 1
DEFAULT_SEQUENCE_LENGTH = 128  # BERT pre-training phase 1 (Devlin et al. 2019, appendix A.2)
_MEMO_SIZE = 64
_memo: OrderedDict[str, ModelProfile] = OrderedDict()
_memories: dict[str, joblib.Memory] = {}


def cache_dir() -> Path:
    """Where profiles are cached on disk: ``$IPU_TUNE_CACHE_DIR`` or ``~/.cache/ipu_tune``."""
    env = os.environ.get("IPU_TUNE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ipu_tune"


def clear_memory_cache() -> None:
    """Forget in-process profiles (the disk cache stays)."""
    _memo.clear()


def _target_stamp(target: str) -> str:
    """The factory's source file state, so that editing a `_target_` model re-profiles it."""
    obj = resolve_target(target)
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    return f"{path}:{st.st_mtime_ns}:{st.st_size}"


def cache_key(cfg: ModelConfig) -> str:
    fields = dataclasses.asdict(cfg)
    fields["torch_version"] = torch.__version__
    fields["profile_format"] = PROFILE_FORMAT
    if cfg._target_:
        fields["target_stamp"] = _target_stamp(cfg._target_)
    return json.dumps(fields, sort_keys=True, default=repr)


def _label(cfg: ModelConfig) -> str:
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
            f"{_label(cfg)}: pipeline_blocks must be a list of module names or "
            "(name, first module) pairs"
        )
    return list(declared), True


def _compute(cfg: ModelConfig) -> ModelProfile:
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
            f"{_label(cfg)}: cannot run forward and backward on the meta device ({_one_line(exc)})"
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
        preprocess_s_per_sample=ds.preprocess_s_per_sample,
        torch_version=torch.__version__,
    )


def _cached_compute(key: str, cfg: ModelConfig) -> ModelProfile:
    """Disk-cached `_compute`; joblib hashes only `key` (which holds every field of `cfg`)."""
    del key
    return _compute(cfg)


def _disk(location: Path) -> Any | None:
    loc = str(location)
    if loc not in _memories:
        try:
            location.mkdir(parents=True, exist_ok=True)
            _memories[loc] = joblib.Memory(location=loc, verbose=0)
        except OSError:
            return None
    return _memories[loc].cache(_cached_compute, ignore=["cfg"])


def profile_model(cfg: ModelConfig) -> ModelProfile:
    """Profile the model of a `model:` config section (per sample; cached)."""
    if not cfg.name and not cfg._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    if not cfg.input_shape or any(int(d) < 1 for d in cfg.input_shape):
        raise bad_value("model.input_shape", list(cfg.input_shape), "positive integers")
    if cfg.sequence_length is not None and cfg.sequence_length < 1:
        raise bad_value("model.sequence_length", cfg.sequence_length, "must be >= 1")
    key = cache_key(cfg)
    hit = _memo.get(key)
    if hit is not None:
        _memo.move_to_end(key)
        return hit
    cached = _disk(cache_dir())
    if cached is None:
        prof = _compute(cfg)
    else:
        with warnings.catch_warnings():
            # An unwritable cache only costs time; joblib reports it as a warning.
            warnings.simplefilter("ignore")
            prof = cached(key, cfg)
    _memo[key] = prof
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return prof
