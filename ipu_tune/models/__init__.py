"""Model zoo and torch profiler (placeholder exports; filled in by the models work)."""

from ipu_tune.models._profile import OP_KINDS, BlockProfile, ModelProfile, OpProfile

__all__ = ["OP_KINDS", "BlockProfile", "ModelProfile", "OpProfile", "profile_model"]


def profile_model(cfg):  # type: ignore[no-untyped-def]
    raise NotImplementedError("models work in progress")
