"""`profile_model`: build on the meta device, trace, group into blocks, cache.

Two cache levels. On disk (JSON data under ``$IPU_TUNE_CACHE_DIR`` or ``~/.cache/ipu_tune``,
checked when read, never unpickled) keyed by every field of the model config, the torch
version and the profile format, so a new process does not trace again; in process, a small
LRU of finished profiles so that the tuner's thousands of trials pay a dictionary lookup.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections import OrderedDict
from collections.abc import Hashable
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ipu_tune.config import ModelConfig, read_text
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._config_json import config_json_stamp
from ipu_tune.models._hf_names import HUB_MODELS
from ipu_tune.models._profile import ModelProfile
from ipu_tune.models._profile_store import load_profile, profile_path, save_profile

__all__ = ["PROFILE_FORMAT", "cache_dir", "clear_memory_cache",
           "profile_model"]  # fmt: skip

# Bump when what the profiler records changes, so that old disk entries are not reused.
PROFILE_FORMAT = 19  # 15: why a step ran on the CPU; 16: no saved dropout or causal masks;
# 17: a substitute for DETR's timm backbone trains timm's stages (backward work, saved values);
# 18: a layer list of several of the model's own layer classes (Jamba's) is split into blocks;
# 19: each stage list a config's `depths` counts is split (SwiftFormer's stages)


@cache
def _torch_version() -> str:
    # From the installed metadata: the cache key must not cost a torch import.
    try:
        return version("torch")
    except PackageNotFoundError:
        import torch

        return str(torch.__version__)
_MEMO_SIZE = 64
_memo: OrderedDict[str, ModelProfile] = OrderedDict()
_keys: dict[Hashable, str] = {}  # `_quick_key` of a config -> its cache key
_SCALARS = frozenset({str, int, float, bool, type(None)})


def cache_dir() -> Path:
    """Where profiles are cached on disk: ``$IPU_TUNE_CACHE_DIR`` or ``~/.cache/ipu_tune``."""
    env = os.environ.get("IPU_TUNE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ipu_tune"


def clear_memory_cache() -> None:
    """Forget in-process profiles (the disk cache stays)."""
    _memo.clear()
    _keys.clear()


def _target_stamp(target: str) -> str:
    """The factory's source file contents, so that editing a `_target_` model re-profiles it
    (a rewrite may keep the file's size and time stamp)."""
    from ipu_tune.models._zoo import resolve_target

    obj = resolve_target(target)
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    return f"{path}:{_contents_digest(Path(path))}" if path else ""


def _contents_digest(path: Path) -> str:
    """'' for what is no readable text file: building the model names the problem."""
    try:
        return hashlib.sha256(read_text(path, "file").encode()).hexdigest()
    except IpuTuneError:
        return ""


# Zoo names built through Transformers (their profiles depend on its version too).
_HF_ZOO = frozenset({"gpt2", "gpt2_medium", "gpt2_large", "gpt2_xl"})


@cache
def _version_of(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


def _config_json_stamp(path_text: str) -> str:
    """A config.json's contents (`config_json_stamp`); '' for no readable file: building the
    model names the problem."""
    try:
        return config_json_stamp(path_text)
    except IpuTuneError:
        return ""


def cache_key(cfg: ModelConfig) -> str:
    fields = dataclasses.asdict(cfg)
    fields["torch_version"] = _torch_version()
    fields["profile_format"] = PROFILE_FORMAT
    if cfg._target_:
        fields["target_stamp"] = _target_stamp(cfg._target_)
    if cfg.hf.model_type or cfg.hf.config_file or cfg.name == "hf" or cfg.name in _HF_ZOO:
        fields["transformers_version"] = _version_of("transformers")
        if cfg.hf.config_file:
            fields["config_file_stamp"] = _config_json_stamp(cfg.hf.config_file)
    return json.dumps(fields, sort_keys=True, default=repr)


def _quick_key(cfg: ModelConfig) -> Hashable | None:
    """What stands for the JSON key (`cache_key`) in process: every field of the config, far
    cheaper than the JSON (the public `evaluate` pays this per call). The scalar fields and
    their types (1, 1.0 and True are one key otherwise); a config with kwargs, or a field that
    is no scalar (an unchecked config), is keyed by repr(cfg), 4x dearer. None for a
    `_target_` model, which re-stamps its source each time."""
    if cfg._target_ or cfg.hf.config_file:
        return None
    d = cfg.dataset
    # The shape's length follows from the tuple's: the other fields are one element each.
    shape = cfg.input_shape if cfg.input_shape is not None else [None]  # unset
    values = (cfg.name, *shape, cfg.num_classes, cfg.sequence_length, d.name,
              d.sample_bytes, d.preprocess_s_per_sample, d.sequences_per_pack)
    types = tuple(map(type, values))
    if cfg.kwargs or cfg.hf.model_type or cfg.hf.config or cfg.hf.task or \
            not _SCALARS.issuperset(types):
        return repr(cfg)
    return values, types


def _check_hf_keys(cfg: ModelConfig) -> None:
    """`model.hf` describes a Transformers model: with a factory or a zoo model of our own it
    would be ignored, and a zoo name of the Transformers path is already a model type."""
    hf = cfg.hf
    given = [k for k in ("model_type", "config_file", "config", "task")
             if getattr(hf, k) is not None]
    if not given or (cfg.name == "hf" and not cfg._target_):
        return
    key = given[0]
    if cfg._target_ or cfg.name not in HUB_MODELS:
        what = f"model._target_={cfg._target_!r}" if cfg._target_ else f"model.name={cfg.name!r}"
        raise bad_value(f"model.hf.{key}", getattr(hf, key),
                        f"only for a Transformers model (model=hf), not with {what}")
    if key in ("model_type", "config_file"):
        hub = HUB_MODELS[str(cfg.name)]
        raise bad_value(f"model.hf.{key}", getattr(hf, key),
                        f"not with model.name={cfg.name!r}, which is the {hub.model_type} type "
                        "with published sizes (model.hf.config and model.hf.task change it); "
                        "another type or file: model=hf")


def _check(cfg: ModelConfig) -> None:
    if not cfg.name and not cfg._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    _check_hf_keys(cfg)
    if cfg.input_shape is not None and (
            not cfg.input_shape or any(int(d) < 1 for d in cfg.input_shape)):
        raise bad_value("model.input_shape", list(cfg.input_shape), "positive integers")
    if cfg.sequence_length is not None and cfg.sequence_length < 1:
        raise bad_value("model.sequence_length", cfg.sequence_length, "must be >= 1")


def profile_model(cfg: ModelConfig) -> ModelProfile:
    """Profile the model of a `model:` config section (per sample; cached)."""
    quick = _quick_key(cfg)
    key = _keys.get(quick) if quick is not None else None
    if key is None or key not in _memo:
        _check(cfg)  # else a config with every field the same passed it when it missed
        if key is None:
            key = cache_key(cfg)
            if quick is not None and len(_keys) < _MEMO_SIZE * 8:
                _keys[quick] = key
    hit = _memo.get(key)
    if hit is not None:
        _memo.move_to_end(key)
        return hit
    path = profile_path(cache_dir(), key)
    prof = load_profile(path, key)  # data only: a file that does not check out is redone
    if prof is None:
        from ipu_tune.models._build import compute

        prof = compute(cfg)
        save_profile(path, key, prof)
    _memo[key] = prof
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return prof
