"""Which `model.hf.config` overrides a Transformers model fails on.

A config class checks few of its fields: a value it takes may fail later in Transformers' or
torch's code, as the model is built (`pad_token_id` past the vocabulary: torch's Embedding
asserts) or as it runs (two experts per token of four by default eight: `topk` refuses; 32
heads over 3 key-value heads: the attention's shapes differ). The error then names an operator,
not a setting; the setting to name is the override without which the model builds, or runs.
Each try rebuilds the model, so at most `MAX_TRIED_OVERRIDES` are tried, one left out at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value, shown
from ipu_tune.models._hf_names import built_mappings, hf_overrides

__all__ = [
    "MAX_TRIED_OVERRIDES",
    "blame_overrides",
    "defaulted_task_error",
    "failing_overrides",
    "few_layers",
    "plain_rule",
    "unprofiled_heads",
]

# Most overrides tried one at a time (a build on the meta device takes up to seconds; the
# error path of a long list would take minutes).
MAX_TRIED_OVERRIDES = 8
# The layers a retry runs when the user left the count to the config class's default (32 for
# Llama): a layer's failure shows in its first one, and a retry must stay cheap.
_RETRY_LAYERS = 1


def failing_overrides(source: ModelConfig, fails: Callable[[ModelConfig], bool],
                      extra: dict[str, Any] | None = None) -> list[str]:
    """The `model.hf.config` keys without any one of which `fails(config)` is False: one key
    to blame, or two or more whose values clash. Empty when no single key is to blame or there
    are too many to try. `extra` joins each retry's overrides where the user gave no value."""
    given = hf_overrides(source)
    if not 0 < len(given) <= MAX_TRIED_OVERRIDES:
        return []
    found = []
    for key in given:
        rest = {**(extra or {}), **{k: v for k, v in given.items() if k != key}}
        without = dataclasses.replace(source, hf=dataclasses.replace(source.hf, config=rest))
        if not fails(without):
            found.append(key)
    return found


def few_layers(config: Any) -> dict[str, Any]:
    """Overrides that keep a retry of `config`'s model to `_RETRY_LAYERS` layer, for a config
    class with the usual layer count (`num_hidden_layers`, aliased as GPT-2's `n_layer`)."""
    layers = getattr(config, "num_hidden_layers", None)
    if isinstance(layers, int) and layers > _RETRY_LAYERS:
        return {"num_hidden_layers": _RETRY_LAYERS}
    return {}


def blame_overrides(source: ModelConfig, keys: list[str], what: str, why: str,
                    allowed: str) -> IpuTuneError | None:
    """The one-line error naming `keys` of `model.hf.config` for `why`: the model `what`s
    (builds, runs) without any one of them. None when no key is to blame."""
    given = hf_overrides(source)
    if len(keys) == 1:
        return bad_value(f"model.hf.config.{keys[0]}", given[keys[0]],
                         f"{why}; allowed: {allowed} (it {what} without this one)")
    if keys:
        clash = ", ".join(f"{k}={shown(given[k])}" for k in keys)
        return IpuTuneError(f"model.hf.config: {clash}: {why}; allowed: values that {what[:-1]} "
                            f"together (it {what} without any one of them)")
    return None


def plain_rule(config: Any) -> str:
    """A rule of Transformers' layers that `config` breaks and its class does not check, said
    plainly; empty when none is known to be broken."""
    heads, groups = (getattr(config, k, None) for k in ("num_attention_heads",
                                                         "num_key_value_heads"))
    if isinstance(heads, int) and isinstance(groups, int) and groups > 0 and heads % groups:
        return (f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads "
                f"({groups})")
    per_token = getattr(config, "num_experts_per_tok", None)
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        experts = getattr(config, key, None)
        if isinstance(experts, int) and isinstance(per_token, int) and per_token > experts:
            return f"num_experts_per_tok ({per_token}) must be at most {key} ({experts})"
    return ""


# Transformers' auto mappings of no head: the base model, its image, backbone and pretraining
# forms; every other mapping ipu-tune does not build (`TASKS`) names a head it does not profile.
_NOT_HEADS = ("MODEL_MAPPING_NAMES", "MODEL_FOR_IMAGE_MAPPING_NAMES",
              "MODEL_FOR_BACKBONE_MAPPING_NAMES", "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
              "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES")


def unprofiled_heads(model_type: str) -> list[str]:
    """The heads Transformers has for `model_type` that ipu-tune does not build, by the names
    of their auto mappings (`object detection`, `universal segmentation`)."""
    from transformers.models.auto import modeling_auto

    built = built_mappings() | set(_NOT_HEADS)
    return [name.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES").lower().replace("_", " ")
            for name in sorted(dir(modeling_auto))
            if name.startswith("MODEL_FOR_") and name.endswith("_MAPPING_NAMES")
            and name not in built and model_type in getattr(modeling_auto, name)]


def defaulted_task_error(source: ModelConfig, exc: IpuTuneError) -> IpuTuneError:
    """`exc` as the user's key: a refusal of `model.hf.task` the user did not set (ipu-tune
    chose it: the type's usual head, or its base model when no head it builds fits) is the
    model type's, or the config file's; and a type whose own task is one ipu-tune does not
    profile (a detector's) says so, and how to bring it."""
    text = str(exc)
    if source.hf.task is not None or not text.startswith("model.hf.task="):
        return exc
    task, _, why = text.removeprefix("model.hf.task=").partition(": ")
    key, value = (("model.hf.config_file", source.hf.config_file) if source.hf.config_file
                  else ("model.hf.model_type", source.hf.model_type))
    # ipu-tune's fallback when no head it builds fits the type: its base model, or none.
    fallback = task in ("'feature-extraction'", "None")
    heads = unprofiled_heads(str(source.hf.model_type)) if fallback and key.endswith("type") else []
    if heads:
        base = ("nor does its base model run alone (model.hf.task=feature-extraction: it reads "
                "more than one input)" if task == "'feature-extraction'" else
                "and it has no base model to profile instead")
        return bad_value(key, value, f"its task, {' / '.join(heads)}, is not one ipu-tune "
                         f"profiles from Transformers, {base}; allowed: the model as a factory "
                         "of your own taking one tensor, model._target_=pkg.module.factory (a "
                         "study of it is read back with --trust-remote-code: docs/models.md, "
                         "docs/safety.md)")
    if task == "None":
        return bad_value(key, value, f"no usual head ipu-tune builds (model.hf.task unset): {why}")
    return bad_value(key, value, f"model.hf.task unset takes its usual head, {task}: {why}")
