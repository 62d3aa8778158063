"""Model zoo and torch profiler: what the model is, per op and per pipeline block.

``profile_model(cfg)`` builds the model of a ``model:`` config section on the meta device
(no weights), traces one training step with torch's FLOP counter, and returns a frozen
`ModelProfile` of per-sample costs. Results are cached on disk and in process.
"""

from ipu_tune.models._assemble import default_blocks
from ipu_tune.models._profile import OP_KINDS, BlockProfile, ModelProfile, OpProfile
from ipu_tune.models._profiler import (
    DEFAULT_SEQUENCE_LENGTH,
    PROFILE_FORMAT,
    cache_dir,
    clear_memory_cache,
    profile_model,
)
from ipu_tune.models._zoo import ZOO, ZooEntry, build_model

__all__ = [
    "DEFAULT_SEQUENCE_LENGTH",
    "OP_KINDS",
    "PROFILE_FORMAT",
    "ZOO",
    "BlockProfile",
    "ModelProfile",
    "OpProfile",
    "ZooEntry",
    "build_model",
    "cache_dir",
    "clear_memory_cache",
    "default_blocks",
    "profile_model",
]
