"""The Transformers config a `model.hf` section builds: a model type with overrides, or a
downloaded `config.json`, checked (layer counts, sizes, misspelt fields) before any model is
built."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value, key_name
from ipu_tune.models._config_json import _one_line, config_json_label, config_json_values
from ipu_tune.models._hf_defaults import fill_derived_sizes, timm_resnet_as_transformers
from ipu_tune.models._hf_names import (
    DEFAULT_TASKS,
    config_source,
    hf_overrides,
)

__all__ = ["MAX_HF_LAYERS", "MAX_HF_SIZE", "check_tables", "hf_config", "hf_settings",
           "layer_counts"]

# Config fields that count a model's layers or stages (n_layer: GPT-2; n_layers: DistilBERT;
# num_stages: ConvNeXt, ResNet; num_encoder_blocks: SegFormer; encoder_layers: BART); a list
# field `depths` (Swin, ConvNeXt: layers per stage) counts the stages by its length.
_LAYER_KEYS = re.compile(r"^(n_layers?|num_layers|num_(hidden|encoder|decoder)_layers|"
                         r"(encoder|decoder)_layers|num_stages|num_encoder_blocks)$")  # fmt: skip
# Most layers a config may count: 8x the deepest published Transformers model (Llama 3.1
# 405B: 126 layers), yet tracing it on the meta device stays within a minute; beyond, a typo
# (1e9) would build for ever, and autograd's backward through 4,096 GPT-2 layers overflows
# the C stack (a segmentation fault, no line).
MAX_HF_LAYERS = 1024


# Config fields that size a model (widths, heads, vocabulary, positions, image and patch
# sides, labels): each at least 1. A model built with 0 divides by it or makes empty tensors,
# with a negative one torch fails on a negative dimension; Transformers checks neither.
_SIZE_KEYS = re.compile(
    r"^(hidden_size|intermediate_size|image_size|patch_size|head_dim|embed_dim|"
    r"max_(source|target|speech|text)_positions|n_positions|n_ctx|n_embd|n_inner|"
    r"n_head|d_model|d_ff|d_kv|(num|encoder|decoder)_attention_heads|num_heads|"
    r"num_key_value_heads|num_channels|num_labels|projection_dim|(encoder|decoder)_ffn_dim|"
    r"num_mel_bins|num_frames|tubelet_size|num_image_tokens|"
    # Per-stage lists (ResNet's, ConvNeXt's, SegFormer's widths, heads and patches).
    r"\w+_sizes|\w+_dims|\w+_channels)$")
# Config fields that size an embedding table: every vocabulary (`vocab_size`, BERT's
# `type_vocab_size`, `text_vocab_size`, ...), position (LayoutLM's `max_2d_position_embeddings`,
# MarkupLM's `max_xpath_tag_unit_embeddings`) and bucket count (T5's
# `relative_attention_num_buckets`). Sizes too, but 0 may mean no table at all (GTE's
# `type_vocab_size`, which gte-base-en-v1.5 sets to 0; modeling_gte.py): a 0 is refused only
# where the model built from it holds an empty table (`check_tables`), whose first lookup fails
# (`index_select`).
_TABLE_KEYS = re.compile(
    r"^((\w+_)?vocab_sizes?|vocab_size_per_layer_input|(\w+_)?max_\w*embeddings|"
    r"num_(\w+_)?position_embeddings|num_embeddings|(relative_attention|position_bias)_num_"
    r"buckets|num_hash_buckets)$")
# Largest size (2^24, as `model.num_classes`): far above any published model's width,
# vocabulary (256 k) or image side, and small enough that a tensor of two such sizes stays
# within int64 bytes. Any other integer given is at most 2^31 - 1: beyond, torch's C++ cannot
# take it as a size and says so in a stack trace.
MAX_HF_SIZE = 2**24
_MAX_HF_INT = 2**31 - 1


def _check_numbers(data: Mapping[str, Any], where: Callable[[str], str],
                   defaults: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse, in what the user gave (nested configs too): a layer count (`_LAYER_KEYS`, an
    entry of `depths`) not an integer 1..MAX_HF_LAYERS, a size (`_SIZE_KEYS`, or each side of
    a [height, width]) not an integer 1..MAX_HF_SIZE (a config class's alias, GPT-2's
    `num_hidden_layers`, takes 2.5 unchecked), any other integer beyond +-(2^31 - 1), a float
    that is not finite (JSON's Infinity: the config would hold it, and its export writes
    None). What the config class's own default (`defaults`, `to_dict()`) holds at a key is
    allowed there: DPR's `projection_dim` 0 (no projection), Mamba-2's `time_step_limit`
    (0.0, inf). `where(path)` names the key as the user wrote it."""
    for key, value in data.items():
        default = defaults.get(key)
        if isinstance(value, Mapping):
            _check_numbers(value, where, default if isinstance(default, Mapping) else {},
                           f"{prefix}{key}.")
            continue
        items = value if isinstance(value, list) else [value]
        usual = list(default) if isinstance(default, list | tuple) else [default]
        if any(_infinite(v) for v in items) and not any(_infinite(v) for v in usual):
            raise bad_value(where(prefix + key), value, "a finite number (not inf or nan)")
        ints = [v for v in items if isinstance(v, int) and not isinstance(v, bool)]
        table = _TABLE_KEYS.match(key)
        counted = _LAYER_KEYS.match(key) or key == "depths" or _SIZE_KEYS.match(key) or table
        if counted and any(isinstance(v, float | str) for v in items) and not any(
                isinstance(v, float | str) for v in usual):  # 2.5 layers, "768"
            ints = [0]  # refused below, with what the key allows
        low = 0 if 0 in usual or table else 1  # a table's 0: `check_tables`, once built
        if _LAYER_KEYS.match(key) or key == "depths":
            high = MAX_HF_LAYERS
            allowed = (f"a layer count from {low} to {high}, an integer (the deepest published "
                       "models have about 130)")
        elif table:
            high = MAX_HF_SIZE
            allowed = (f"a size from 1 to {high:,} (2^24), an integer, or 0 where the model "
                       "then builds no such table")
        elif _SIZE_KEYS.match(key):
            high = MAX_HF_SIZE
            allowed = f"a size from {low} to {high:,} (2^24), an integer"
        else:
            low, high = -_MAX_HF_INT, _MAX_HF_INT
            allowed = f"an integer within +-{high:,} (2^31 - 1)"
        if any(not low <= v <= high for v in ints):
            raise bad_value(where(prefix + key), value, allowed)


def check_tables(cfg: ModelConfig, model: Any) -> None:
    """Refuse a model built with an empty embedding table (a `_TABLE_KEYS` field given as 0
    where its model builds the table regardless; where 0 means no table, none is built),
    naming the field given as 0: the user's override, else the config file's."""
    empty = next((name for name, module in model.named_modules()
                  if getattr(module, "num_embeddings", None) == 0), None)
    if empty is None:
        return
    allowed = (f"a size from 1 to {MAX_HF_SIZE:,} (2^24), an integer: the model builds an empty "
               f"embedding table from 0 ({empty}), whose first lookup fails")
    sources = [(hf_overrides(cfg), "model.hf.config.")]
    if cfg.hf.config_file:
        file = config_json_label(cfg.hf.config_file)
        sources.append((config_json_values(cfg.hf.config_file),
                        f"model.hf.config_file={file!r}: field "))
    zeros = [where + path for given, where in sources for path, key, value in _leaves(given)
             if _TABLE_KEYS.match(key) and value == 0]
    if len(zeros) == 1:
        raise bad_value(zeros[0], 0, allowed)
    if zeros:  # which one sized the empty table is the model's code: each is named
        raise IpuTuneError(f"{', '.join(z + '=0' for z in zeros)}: one of them sizes an empty "
                           f"embedding table ({empty}), whose first lookup fails; allowed: a "
                           f"size from 1 to {MAX_HF_SIZE:,} (2^24), or 0 where the model then "
                           "builds no such table")
    key, value = config_source(cfg, False)
    raise bad_value(key, value, f"Transformers builds it with an empty embedding table ({empty})")


def _infinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _config_class(model_type: str, data: Mapping[str, Any], file: str | None) -> Any:
    """The config class of `model_type`; the refusal names the file the type was read from."""
    from transformers import CONFIG_MAPPING

    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type]
    known = f"a Transformers model type, such as {', '.join(sorted(DEFAULT_TASKS))}"
    if file is None:
        raise bad_value("model.hf.model_type", model_type, known, CONFIG_MAPPING.keys())
    # A Hub model with its own code names it in "auto_map"; that code is never imported.
    own_code = ("; its own modeling code (\"auto_map\") is not run: give the model as a "
                "factory, model._target_ (docs/models.md)") if "auto_map" in data else ""
    raise bad_value("model.hf.config_file", file,
                    f"a config.json whose model_type is {known}, not {model_type!r}{own_code}")


@cache
def _default_config(config_class: Any) -> Any:
    """A config class built with its defaults (read, never changed)."""
    return config_class()


@cache
def _defaults(config_class: Any) -> dict[str, Any]:
    """A config class's defaults, its sub-configs' as mappings (`to_dict`)."""
    out: dict[str, Any] = _default_config(config_class).to_dict()
    return out


def _check_overrides(config_class: Any, overrides: Mapping[str, Any]) -> None:
    """Config classes accept any keyword silently; a misspelt one would change nothing."""
    default = _default_config(config_class)
    known = set(_defaults(config_class)) | set(getattr(config_class, "attribute_map", {}))
    for key in overrides:
        if key not in known and not hasattr(default, key):
            fields = sorted(k for k in known if not k.startswith("_"))
            # The nearest names first (a misspelling), then the others in order.
            near = difflib.get_close_matches(key, fields, n=3)
            sample = ", ".join([*near, *(f for f in fields if f not in near)][:12])
            raise IpuTuneError(f"model.hf.config.{key_name(key)}: no field of "
                               f"{config_class.__name__}; its fields: {sample}, ...")


# A classifier's labels when `model.num_classes` is unset: Transformers' default `num_labels`.
_DEFAULT_LABELS = 2
# The heads that read `model.num_classes` (their labels, Transformers' `num_labels`).
LABEL_TASKS = ("sequence-classification", "token-classification", "image-classification",
               "audio-classification")


def check_classes(cfg: ModelConfig, config: Any, task: str) -> None:
    """A head of no labels (a language model's vocabulary) does not read `model.num_classes`:
    given (any value, the seed setting's 10 and Transformers' 2 too), it would be ignored
    without a word. Question answering's span head reads its config's `num_labels`, start and
    end: that count is allowed."""
    if cfg.num_classes is None:
        return
    if task in LABEL_TASKS:
        named = _named_labels(cfg)
        if named is not None and cfg.num_classes != named[1]:
            raise bad_value("model.num_classes", cfg.num_classes,
                            f"unset or {named[1]}, the labels {named[0]} names")
        return
    span = getattr(config, "num_labels", 2)
    if task == "question-answering" and cfg.num_classes == span:
        return
    also = f" or {span}, its start and end" if task == "question-answering" else ""
    raise bad_value("model.num_classes", cfg.num_classes,
                    f"a {task} head of {config.model_type} reads no labels (it sets those of a "
                    f"{', '.join(LABEL_TASKS[:-1])} or {LABEL_TASKS[-1]} head); allowed: "
                    f"unset{also}")


def _named_labels(cfg: ModelConfig) -> tuple[str, int] | None:
    """(where, count) of the labels `model.hf.config` or the config file names (`num_labels`,
    or `id2label`'s entries), else None: a fine-tuned checkpoint's config.json keeps them."""
    sources = [("model.hf.config", hf_overrides(cfg))]
    if cfg.hf.config_file:
        sources.append((f"model.hf.config_file={cfg.hf.config_file!r}",
                        config_json_values(cfg.hf.config_file)))
    for where, values in sources:
        if isinstance(values.get("id2label"), dict) and values["id2label"]:
            return where, len(values["id2label"])
        if isinstance(values.get("num_labels"), int) and values["num_labels"] > 0:
            return where, int(values["num_labels"])
    return None


def hf_settings(cfg: ModelConfig, config: Any = None) -> dict[str, Any]:
    """What ipu-tune sets on a Transformers config (`config`, else `cfg`'s own) before it
    builds the model, besides `model.hf.config`: a classifier's labels (`model.num_classes`,
    unless the config or its file names them: `_named_labels`), a padding token for sequence
    classification (a batch of more than one sequence needs one; GPT-2 has none), a CTC
    head's characters. The profile
    and every exported program build the model with the same."""
    from ipu_tune.models._hf_names import hf_task

    config = config if config is not None else hf_config(cfg)
    task = hf_task(cfg, config.model_type, getattr(config, "architectures", None))
    out: dict[str, Any] = {}
    if task in LABEL_TASKS:
        if _named_labels(cfg) is None:
            out["num_labels"] = (cfg.num_classes if cfg.num_classes is not None
                                 else _DEFAULT_LABELS)
        if task == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
            out["pad_token_id"] = getattr(config, "eos_token_id", 0) or 0
    if task == "ctc" and getattr(config, "vocab_size", 0) is None:
        # Wav2Vec2Config's default, 32 (Transformers' own CTC fine-tuning vocabulary size);
        # the Wav2Vec2-BERT and Conformer configs leave it unset.
        out["vocab_size"] = 32
    return out


def hf_config(cfg: ModelConfig) -> Any:
    """The `transformers` config of `cfg.hf` (a model type or a config file, plus overrides)."""
    hf = cfg.hf
    overrides = hf_overrides(cfg)
    if hf.config_file:
        data = config_json_values(hf.config_file)
        model_type = str(data["model_type"])
        if hf.model_type and hf.model_type != model_type:
            allowed = f"{model_type!r}, the model_type of {hf.config_file}, or unset"
            raise bad_value("model.hf.model_type", hf.model_type, allowed)
    elif hf.model_type:
        data, model_type = {}, hf.model_type
    else:
        raise IpuTuneError("model.hf.model_type: missing; give a Transformers model type "
                           "(bert, gpt2, llama, vit, t5, ...) or model.hf.config_file")  # fmt: skip
    file = config_json_label(hf.config_file) if hf.config_file else None
    config_class = _config_class(model_type, data, file)
    defaults = _defaults(config_class)
    _check_numbers(data, lambda path: f"model.hf.config_file={file!r}: field {path}", defaults)
    _check_numbers(overrides, lambda path: f"model.hf.config.{path}", defaults)
    _check_overrides(config_class, overrides)
    values = {k: v for k, v in data.items() if k not in ("model_type", "transformers_version")}
    try:
        config = config_class(**{**values, **overrides})
    except Exception as exc:
        if not isinstance(exc, _config_errors()):
            raise
        refused = _refused_field(exc, config_class, overrides, values)
        if refused is not None:
            given, path, value, allowed = refused
            where = (f"model.hf.config.{path}" if given is overrides
                     else f"model.hf.config_file={file!r}: field {path}")
            raise bad_value(where, value, allowed) from None
        key, value = config_source(cfg, _file_fails(config_class, values, overrides))
        raise bad_value(key, value, f"{config_class.__name__}: {_one_line(exc)}") from None
    fill_derived_sizes(config)  # sizes a config class leaves None and its model reads
    timm_resnet_as_transformers(config)  # DETR's backbone without the timm package
    # Attention as an IPU runs it (matmul, softmax, matmul; optimum-graphcore's attention
    # classes), not a fused CPU/GPU kernel.
    config._attn_implementation = "eager"
    return config


@cache
def _config_errors() -> tuple[type[Exception], ...]:
    """What a config class raises on values it refuses. Transformers' config classes are
    strict dataclasses (huggingface_hub, imported with Transformers): a value of another type
    than a field's is refused at construction, naming the field (`_refused_field`)."""
    from huggingface_hub.errors import StrictDataclassError

    return TypeError, ValueError, AttributeError, KeyError, StrictDataclassError


_FIELD = re.compile(r"^Validation error for field '([^']+)'")
_TYPES = re.compile(r"expected (.+?), got (\w+)")
_UNION = re.compile(r"doesn't match any type in \((.+?)\)\. Errors:")


def _refused_field(exc: Exception, config_class: Any, *given: Mapping[str, Any],
                   ) -> tuple[Mapping[str, Any], str, Any, str] | None:
    """Where a strict config class's refusal of a field's type points in what was `given`
    (the overrides, the file's values): (that mapping, the field's dotted path in it, its
    value, what it allows: `GPT2Config takes int here, not float`). None unless exactly one
    given value of that name (an alias of it: GPT-2's `num_hidden_layers`; a sub-config's
    field: `text_config.x`) has the refused type."""
    from huggingface_hub.errors import StrictDataclassFieldValidationError

    found, types = _FIELD.match(str(exc)), _TYPES.search(str(exc))
    if not isinstance(exc, StrictDataclassFieldValidationError) or not found or not types:
        return None
    union = _UNION.search(str(exc))  # its first "expected" is of its last type, not the fault
    expected = f"one of {union.group(1)}" if union else types.group(1)
    aliases = getattr(config_class, "attribute_map", {})
    hits = [(mapping, path, value) for mapping in given
            for path, name, value in _leaves(mapping)
            if found.group(1) in (name, aliases.get(name) if "." not in path else None)
            and type(value).__name__ == types.group(2)]
    if len(hits) != 1:
        return None
    mapping, path, value = hits[0]
    owner = config_class.__name__ if "." not in path else f"{path.rsplit('.', 1)[0]}'s config"
    if union:
        return mapping, path, value, f"{owner} takes {expected} here"
    return mapping, path, value, f"{owner} takes {expected} here, not {types.group(2)}"


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str, Any]]:
    """(dotted path, last key, value) of every value that is no mapping, nested ones too."""
    out = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            out += _leaves(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", key, value))
    return out


def _file_fails(config_class: Any, values: dict[str, Any], overrides: dict[str, Any]) -> bool:
    """Whether the config file's values alone fail (else the command line's overrides do)."""
    if not values or not overrides:
        return bool(values)
    try:
        config_class(**values)
    except _config_errors():
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
