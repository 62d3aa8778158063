"""The Python API (README, "Python API"): `evaluate` and `profile`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipu_tune.case import build_case, simulate_case
from ipu_tune.config import EvalConfig, ModelConfig, load_config, typed, with_model_preset
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    SimConstants,
    SimResult,
    constants_from_mapping,
)

__all__ = ["evaluate", "evaluate_config", "profile"]


def profile(model: Mapping[str, Any] | ModelConfig) -> ModelProfile:
    """Profile a model given as the `model:` section of the config (cached on disk)."""
    if isinstance(model, ModelConfig):
        cfg = model
    else:  # a zoo name takes its preset for the keys not given, as in a config file
        cfg = typed(ModelConfig, with_model_preset({"model": dict(model)})["model"])
    if not cfg.name and not cfg._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    return profile_model(cfg)


def evaluate_config(cfg: EvalConfig, constants: SimConstants = DEFAULT_CONSTANTS) -> SimResult:
    """Simulate one validated config (its case built by `ipu_tune.case.build_case`)."""
    return simulate_case(build_case(cfg), constants)


def evaluate(
    config: str | Path | Mapping[str, Any] | EvalConfig,
    constants: SimConstants | Mapping[str, float] | None = None,
    trust_remote_code: bool = False,
) -> SimResult:
    """Simulate one plan. `config` is a YAML path or a mapping of the config schema;
    `constants` optionally replaces fitted simulator constants (e.g. `ipu-tune calibrate`).
    A YAML file naming `model._target_` needs `trust_remote_code=True`."""
    if constants is None:
        sim_constants = DEFAULT_CONSTANTS
    elif isinstance(constants, SimConstants):
        sim_constants = constants
    else:
        sim_constants = constants_from_mapping(constants)
    return evaluate_config(load_config(config, trust_remote_code), sim_constants)
