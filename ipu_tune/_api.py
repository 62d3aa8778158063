"""The Python API of DESIGN.md (Contract): `evaluate` and `profile`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipu_tune.config import EvalConfig, ModelConfig, load_config
from ipu_tune.config._load import typed
from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import make_system
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import plan_from_config, stage_starts
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    SimConstants,
    SimResult,
    constants_from_mapping,
    simulate,
)

__all__ = ["evaluate", "evaluate_config", "profile"]


def profile(model: Mapping[str, Any] | ModelConfig) -> ModelProfile:
    """Profile a model given as the `model:` section of the config (cached on disk)."""
    cfg = model if isinstance(model, ModelConfig) else typed(ModelConfig, dict(model))
    if not cfg.name and not cfg._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    return profile_model(cfg)


def evaluate_config(cfg: EvalConfig, constants: SimConstants = DEFAULT_CONSTANTS) -> SimResult:
    prof = profile_model(cfg.model)
    plan = plan_from_config(cfg)
    stage_starts(plan, prof)  # split names checked against the model before simulating
    system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
    return simulate(prof, system, plan, constants)


def evaluate(
    config: str | Path | Mapping[str, Any] | EvalConfig,
    constants: SimConstants | Mapping[str, float] | None = None,
    trust_remote_code: bool = False,
) -> SimResult:
    """Simulate one plan. `config` is a YAML path or a mapping of the DESIGN.md schema;
    `constants` optionally replaces fitted simulator constants (e.g. `ipu-tune calibrate`).
    A YAML file naming `model._target_` needs `trust_remote_code=True`."""
    if constants is None:
        sim_constants = DEFAULT_CONSTANTS
    elif isinstance(constants, SimConstants):
        sim_constants = constants
    else:
        sim_constants = constants_from_mapping(constants)
    return evaluate_config(load_config(config, trust_remote_code), sim_constants)
