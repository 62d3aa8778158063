"""Configs written before `model.input_shape` and `model.num_classes` could be unset.

Until then the schema filled in the seed setting (3 x 64 x 64 images, 10 classes; the `model=hf`
preset 2 classes), so a stored study or an exported file of a model that reads neither (a
Transformers model, a token model) holds those values though no one gave them. Read now, they
would be refused as given; and a study's fingerprint, compared key by key, would tell the old
problem from the same one configured today. So a fingerprint fills an unset value with what it
used to be (`fill_old_defaults`: an old study resumes under the same name), and a config read
back from a study or an export drops a value equal to it where its model's preset sets none
(`forget_old_defaults`: a model that reads the key has a preset that sets it, or is a factory).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipu_tune.config._presets import _model_preset, _presets
from ipu_tune.config._schema import SEED_INPUT_SHAPE, SEED_NUM_CLASSES

__all__ = ["fill_old_defaults", "forget_old_defaults"]

# conf/model/hf.yaml's `num_classes` before it could be unset: Transformers' default num_labels.
_HF_PRESET_CLASSES = 2


def _old_defaults(model: Mapping[str, Any]) -> dict[str, Any]:
    classes = _HF_PRESET_CLASSES if model.get("name") == "hf" else SEED_NUM_CLASSES
    return {"input_shape": list(SEED_INPUT_SHAPE), "num_classes": classes}


def fill_old_defaults(flat: dict[str, Any]) -> dict[str, Any]:
    """`flat` (a config by dotted keys) with `model.input_shape` / `model.num_classes` unset
    read as the values the schema used to fill in."""
    old = _old_defaults({"name": flat.get("model.name")})
    return flat | {f"model.{k}": v for k, v in old.items() if flat.get(f"model.{k}", 0) is None}


def forget_old_defaults(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` (a plain config) without the model values equal to what the schema used to fill
    in."""
    model = data.get("model")
    if not isinstance(model, Mapping) or model.get("_target_"):
        return data  # a factory reads both
    name = model.get("name")
    preset = (_model_preset(name).get("model") or {}) if name in _presets("model") else {}
    # A key the model's preset sets (an image model's) is read by the model: kept.
    old = {k: v for k, v in _old_defaults(model).items() if preset.get(k) is None}
    kept = {k: v for k, v in model.items()
            if k not in old or (list(v) if isinstance(v, list | tuple) else v) != old[k]}
    return {**data, "model": kept}
