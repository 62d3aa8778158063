"""The Transformers config a `model.hf` section builds: a model type with overrides, or a
downloaded `config.json`, checked (layer counts, misspelt fields) before any model is built."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._hf_defaults import fill_derived_sizes, timm_resnet_as_transformers
from ipu_tune.models._hf_names import (
    DEFAULT_TASKS,
    _one_line,
    _read_config_file,
    config_source,
    hf_overrides,
)

__all__ = ["MAX_HF_LAYERS", "hf_config", "layer_counts"]

# Config fields that count a model's layers or stages (n_layer: GPT-2; n_layers: DistilBERT;
# num_stages: ConvNeXt, ResNet; num_encoder_blocks: SegFormer; encoder_layers: BART); a list
# field `depths` (Swin, ConvNeXt: layers per stage) counts the stages by its length.
_LAYER_KEYS = re.compile(r"^(n_layers?|num_layers|num_(hidden|encoder|decoder)_layers|"
                         r"(encoder|decoder)_layers|num_stages|num_encoder_blocks)$")  # fmt: skip
# Most layers a config may count: 30x the deepest published Transformers model (Llama 3.1
# 405B: 126 layers), yet building it on the meta device stays within minutes and ~1.5 GB;
# beyond, a typo (1e9) would build for ever.
MAX_HF_LAYERS = 4096


def _check_layer_counts(data: Mapping[str, Any], where: Callable[[str], str],
                        prefix: str = "") -> None:
    """Refuse a layer count (`_LAYER_KEYS`, an entry of `depths`, in nested configs too) the
    user gave that is not 1..MAX_HF_LAYERS; `where(path)` names the key as the user wrote it."""
    for key, value in data.items():
        if isinstance(value, Mapping):
            _check_layer_counts(value, where, f"{prefix}{key}.")
            continue
        if not (_LAYER_KEYS.match(key) or key == "depths"):
            continue
        counts = value if isinstance(value, list) else [value]
        for count in counts:
            if isinstance(count, int) and not isinstance(count, bool) and not (
                    1 <= count <= MAX_HF_LAYERS):
                raise bad_value(where(prefix + key), value, f"a layer count from 1 to "
                                f"{MAX_HF_LAYERS} (the deepest published models have about 130)")


def _config_class(model_type: str, data: Mapping[str, Any], file: str | None) -> Any:
    """The config class of `model_type`; the refusal names the file the type was read from."""
    from transformers import CONFIG_MAPPING

    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type]
    known = f"a Transformers model type, such as {', '.join(sorted(DEFAULT_TASKS))}"
    if file is None:
        raise bad_value("model.hf.model_type", model_type, known)
    # A Hub model with its own code names it in "auto_map"; that code is never imported.
    own_code = ("; its own modeling code (\"auto_map\") is not run: give the model as a "
                "factory, model._target_ (docs/models.md)") if "auto_map" in data else ""
    raise bad_value("model.hf.config_file", file,
                    f"a config.json whose model_type is {known}, not {model_type!r}{own_code}")


def _check_overrides(config_class: Any, overrides: Mapping[str, Any]) -> None:
    """Config classes accept any keyword silently; a misspelt one would change nothing."""
    default = config_class()
    known = set(default.to_dict()) | set(getattr(config_class, "attribute_map", {}))
    for key in overrides:
        if key not in known and not hasattr(default, key):
            sample = ", ".join(sorted(k for k in known if not k.startswith("_"))[:12])
            raise bad_value(f"model.hf.config.{key}", overrides[key],
                            f"a field of {config_class.__name__}: {sample}, ...")  # fmt: skip


def hf_config(cfg: ModelConfig) -> Any:
    """The `transformers` config of `cfg.hf` (a model type or a config file, plus overrides)."""
    hf = cfg.hf
    overrides = hf_overrides(cfg)
    if hf.config_file:
        data = _read_config_file(hf.config_file)
        model_type = str(data["model_type"])
        if hf.model_type and hf.model_type != model_type:
            allowed = f"{model_type!r}, the model_type of {hf.config_file}, or unset"
            raise bad_value("model.hf.model_type", hf.model_type, allowed)
    elif hf.model_type:
        data, model_type = {}, hf.model_type
    else:
        raise IpuTuneError("model.hf.model_type: missing; give a Transformers model type "
                           "(bert, gpt2, llama, vit, t5, ...) or model.hf.config_file")  # fmt: skip
    file = hf.config_file
    _check_layer_counts(data, lambda path: f"model.hf.config_file={file!r}: field {path}")
    _check_layer_counts(overrides, lambda path: f"model.hf.config.{path}")
    config_class = _config_class(model_type, data, hf.config_file)
    _check_overrides(config_class, overrides)
    values = {k: v for k, v in data.items() if k not in ("model_type", "transformers_version")}
    try:
        config = config_class(**{**values, **overrides})
    except _CONFIG_ERRORS as exc:
        key, value = config_source(cfg, _file_fails(config_class, values, overrides))
        raise bad_value(key, value, f"{config_class.__name__}: {_one_line(exc)}") from None
    fill_derived_sizes(config)  # sizes a config class leaves None and its model reads
    timm_resnet_as_transformers(config)  # DETR's backbone without the timm package
    # Attention as an IPU runs it (matmul, softmax, matmul; optimum-graphcore's attention
    # classes), not a fused CPU/GPU kernel.
    config._attn_implementation = "eager"
    return config


_CONFIG_ERRORS = (TypeError, ValueError, AttributeError, KeyError)


def _file_fails(config_class: Any, values: dict[str, Any], overrides: dict[str, Any]) -> bool:
    """Whether the config file's values alone fail (else the command line's overrides do)."""
    if not values or not overrides:
        return bool(values)
    try:
        config_class(**values)
    except _CONFIG_ERRORS:
        return True
    return False


def layer_counts(config: Any) -> set[int]:
    """The layer and stage counts a config states (`_LAYER_KEYS`, `depths`), its sub-configs'
    too (a vision-language model's `text_config` and `vision_config` count its two towers)."""
    return {c for c in _counts(config.to_dict()) if c > 0}


def _counts(values: dict[str, Any]) -> set[int]:
    counts = {v for k, v in values.items() if _LAYER_KEYS.match(k) and isinstance(v, int)}
    if isinstance(values.get("depths"), list):
        counts.add(len(values["depths"]))
    for key, value in values.items():
        if key.endswith("_config") and isinstance(value, dict):
            counts |= _counts(value)
    return counts
