"""Model zoo and torch profiler: what the model is, per op and per pipeline block.

``profile_model(cfg)`` builds the model of a ``model:`` config section on the meta device
(no weights), traces one training step with torch's FLOP counter, and returns a frozen
`ModelProfile` of per-sample costs. Results are cached on disk and in process.
"""

from typing import Any

from ipu_tune.models._config_json import config_json_values, kept_config_files
from ipu_tune.models._conv_norm import conv_norm_folds
from ipu_tune.models._masked import masked_positions
from ipu_tune.models._profile import (
    DEFAULT_SEQUENCE_LENGTH,
    INPUT_KINDS,
    INPUT_SOURCES,
    OP_KINDS,
    BlockProfile,
    ModelProfile,
    OpProfile,
)
from ipu_tune.models._profiler import (
    PROFILE_FORMAT,
    cache_dir,
    clear_memory_cache,
    profile_model,
)

# Names that need torch load on first use, so that a cached profile never imports it.
_LAZY = {
    "ZOO": "ipu_tune.models._zoo",
    "ZOO_ALIASES": "ipu_tune.models._zoo",
    "ZooEntry": "ipu_tune.models._zoo",
    "zoo_entry": "ipu_tune.models._zoo",
    "build_model": "ipu_tune.models._zoo",
    "default_blocks": "ipu_tune.models._assemble",
    # The Transformers path's names: no torch import (exports and labels read them).
    "hf_source": "ipu_tune.models._hf_names",
    "DEFAULT_TASKS": "ipu_tune.models._hf_names",
    "HUB_MODELS": "ipu_tune.models._hf_names",
    "TASKS": "ipu_tune.models._hf_names",
    "AUDIO_TASKS": "ipu_tune.models._hf_names",
    "IMAGE_TOKEN_KEYS": "ipu_tune.models._hf_names",
    "hf_identity": "ipu_tune.models._hf_names",
    "hf_overrides": "ipu_tune.models._hf_names",
    "hf_settings": "ipu_tune.models._hf_config",
    "model_label": "ipu_tune.models._hf_names",
    "unregistered_tower": "ipu_tune.models._hf_names",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ipu_tune.models' has no attribute {name!r}")

__all__ = [
    "AUDIO_TASKS",
    "DEFAULT_SEQUENCE_LENGTH",
    "DEFAULT_TASKS",
    "HUB_MODELS",
    "IMAGE_TOKEN_KEYS",
    "INPUT_KINDS",
    "INPUT_SOURCES",
    "OP_KINDS",
    "PROFILE_FORMAT",
    "TASKS",
    "ZOO",
    "ZOO_ALIASES",
    "BlockProfile",
    "ModelProfile",
    "OpProfile",
    "ZooEntry",
    "build_model",
    "cache_dir",
    "clear_memory_cache",
    "config_json_values",
    "conv_norm_folds",
    "default_blocks",
    "hf_identity",
    "hf_overrides",
    "hf_settings",
    "hf_source",
    "kept_config_files",
    "masked_positions",
    "model_label",
    "profile_model",
    "unregistered_tower",
    "zoo_entry",
]
