"""The case: what one validated config asks the simulator about, built in one place.

`build_case(cfg)` profiles the model, builds the IPU system, turns the config into an
`ExecutionPlan` and checks its splits against the model (stage starts). The Python API, the
tuner, the CLI and calibration all build their cases here, so a config means the same thing
everywhere (data flows config -> profile -> plan -> simulate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipu_tune.config import EvalConfig, read_yaml, validate
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.hardware import System, system_from_config
from ipu_tune.knobs import get_key, pipeline_minimum
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import ExecutionPlan, plan_from_config, stage_starts
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    SimConstants,
    SimResult,
    constants_from_mapping,
    head_placement,
    simulate,
)

__all__ = ["Case", "build_case", "build_system", "constants_of", "head_stages", "read_constants",
           "simulate_case", "validate_whole"]


@dataclass(frozen=True)
class Case:
    profile: ModelProfile
    system: System
    plan: ExecutionPlan
    stage_starts: tuple[int, ...]  # block index at which each pipeline stage begins


def build_system(cfg: EvalConfig) -> System:
    """The IPU system of the config's `system:` section (servers overridden by `system.host`)."""
    return system_from_config(cfg.system)


def build_case(cfg: EvalConfig, profile: ModelProfile | None = None,
               system: System | None = None, whole: bool = True) -> Case:
    """The case of a validated config; `profile`/`system` reuse ones already built for it.

    Raises `IpuTuneError` when a split is not a block of the model or is out of order, or, for
    a `whole` plan (not a search's start, which `validate(check_layout=False)` passed), when
    PopTorch would not compile the pipeline once a tied head's stage is counted.
    """
    prof = profile if profile is not None else profile_model(cfg.model)
    plan = plan_from_config(cfg)
    starts = stage_starts(plan, prof)  # split names checked against the model first
    if whole:
        _check_head_stage(cfg, prof, plan)
    return Case(prof, system if system is not None else build_system(cfg), plan, starts)


def head_stages(profile: ModelProfile, cfg: EvalConfig) -> int:
    """1 when the plan runs a tied head on IPU0 after its last stage (the exports place it
    there: a pipeline stage of its own under PopTorch's AutoIncrement), else 0. The one place
    this is decided: `build_case` checks it, the search and the what-ifs raise to it
    (`config.at_pipeline_minimum`)."""
    if not cfg.plan.pipeline.splits:
        return 0
    return int(head_placement(profile, plan_from_config(cfg)) is not None)


def validate_whole(cfg: EvalConfig, profile: ModelProfile | None = None) -> EvalConfig:
    """`validate(cfg)` of a whole plan; when it fails on PopTorch's pipeline rule, the rule
    counting a tied head's own stage too (`head_stages`), so that one error names the whole
    need, not the splits' first and the head's after it is met."""
    try:
        return validate(cfg)
    except IpuTuneError as exc:
        rule = pipeline_minimum(cfg.workload.mode == "train", len(cfg.plan.pipeline.splits) + 1,
                                cfg.plan.pipeline.schedule)
        if rule is None or not str(exc).startswith(f"{rule[0]}="):
            raise
        prof = profile if profile is not None else profile_model(cfg.model)
        _check_head_stage(cfg, prof, plan_from_config(cfg))
        raise


def _check_head_stage(cfg: EvalConfig, prof: ModelProfile, plan: ExecutionPlan) -> None:
    """PopTorch's pipeline rule (`pipeline_minimum`) with the stage a tied head placed on IPU0
    adds (`head_stages`). The config's own check, before the model was profiled, counted the
    splits' stages only."""
    stages = plan.stages
    rule = pipeline_minimum(plan.training, stages + 1, plan.schedule)
    if rule is None or get_key(cfg, rule[0]) >= rule[1] or not head_stages(prof, cfg):
        return
    head = head_placement(prof, plan)
    assert head is not None  # head_stages found it
    raise bad_value(rule[0], get_key(cfg, rule[0]), (
        f"must be >= {rule[1]}, the pipeline stages: {stages} and the tied head "
        f"`{head.module}`, placed on IPU0 after the last (a stage of its own in every "
        "export, as PopTorch's AutoStage.AutoIncrement runs it), and PopTorch compiles a "
        "pipelined program only then"))


def simulate_case(case: Case, constants: SimConstants = DEFAULT_CONSTANTS) -> SimResult:
    return simulate(case.profile, case.system, case.plan, constants)


def read_constants(path: str | None, key: str = "simulator.constants") -> SimConstants:
    """The simulator constants of a YAML file written by `ipu-tune calibrate --output` (its
    comment lines are ignored); the defaults for None. Errors name `key` and the file."""
    if path is None or path == "":
        return DEFAULT_CONSTANTS
    return constants_of(read_yaml(Path(path), "constants file"), f"{key}={path!r}")


def constants_of(data: Any, where: str) -> SimConstants:
    """The simulator constants of `data` as read from `where` (a file, a stored study's kept
    values), checked, every error naming `where`."""
    if not isinstance(data, Mapping):
        raise IpuTuneError(f"{where}: expected a mapping of constant: value (the file "
                           "`ipu-tune calibrate --output` writes)")
    try:
        return constants_from_mapping(data)
    except IpuTuneError as exc:
        raise IpuTuneError(f"{where}: {exc}") from None
