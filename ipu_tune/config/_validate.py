"""Range and choice checks of the schema; plan-versus-model checks live in `ipu_tune.plan`."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from operator import attrgetter
from typing import Any

from ipu_tune._own_files import reserved_study_name
from ipu_tune.config._numbers import check_numbers
from ipu_tune.config._schema import IPUS, EvalConfig, TuneConfig
from ipu_tune.config._strings import check_strings
from ipu_tune.errors import IpuTuneError, bad_value, bound_text, safe_repr
from ipu_tune.knobs import (
    KNOBS,
    PLAN_KNOBS,
    WORKLOAD_KNOBS,
    Knob,
    checker,
    get_key,
    is_power_of_two,
    never_wrong,
    pipeline_minimum,
    set_key,
    valid_io_tiles,
)

__all__ = [
    "LIMITS",
    "NAME_MAX_CHARS",
    "at_one_proportion_if_moved",
    "at_pipeline_minimum",
    "check_limits",
    "check_name",
    "check_pinned_layout",
    "check_study_name",
    "is_power_of_two",
    "valid_io_tiles",
    "validate",
]

# Upper bounds of the integers that are not plan knobs (a knob's bound is its `Knob.high`):
# what the stores (SQLite INTEGER is int64; products of knobs must stay far below it) and the
# hardware can hold. Why each bound, knobs included:
# - system.num_ipus: 1024, the largest Graphcore system sold (Bow Pod1024); more is a typo.
# - plan.replication_factor / pipeline stages: at most the IPUs, so 1024 as well.
# - gradient_accumulation, device_iterations: 2**20 (PopTorch counts in int32; a global batch of
#   mbs x GA x DI x RF stays below 2**63 even at every bound at once).
# - workload.micro_batch_size: 2**16 samples per IPU per step (In-Processor memory is 900 MB).
# - model.input_shape dims, num_classes, sequence_length: 2**20/2**24/2**20 - far above any
#   model that fits 1024 IPUs, small enough that byte counts stay int64.
# - plan.prefetch_depth: 1024 batches; plan.dataloader_workers: 1024 host processes.
# - plan.host_instances: PopRun instances each hold a replica at least, so 1024 as well.
# - plan.embedding_serialization: 64 slices of a vocabulary (optimum-graphcore's configs use
#   up to 8); more only multiplies compute sets.
# - system.host.cpu_cores: 4096 cores in one host server, several times the largest sold.
# - study.n_trials: 10**6 trials; study.workers: 256 processes on one machine.
_OTHER_LIMITS: dict[str, int] = {
    "model.input_shape": 2**20,
    "model.num_classes": 2**24,
    "model.sequence_length": 2**20,
    "model.dataset.sample_bytes": 2**40,
    "system.num_ipus": 1024,
    "system.hosts": 1024,
    "system.host.cpu_cores": 4096,
}
_TUNE_LIMITS: dict[str, int] = {
    "study.n_trials": 10**6,
    "study.workers": 256,
    "search.global_batch_size": 2**40,
    "sampler.seed": 2**32 - 1,  # numpy's RandomState seeds are uint32
}
_KNOB_LIMITS: dict[str, int] = {
    k.key: int(k.high) for k in KNOBS if k.type is int and k.high is not None}
# Every integer's upper bound, by dotted key.
LIMITS: dict[str, int] = {**_OTHER_LIMITS, **_KNOB_LIMITS, **_TUNE_LIMITS}
# Input tensors of more dimensions than this are not images or token sequences.
_MAX_INPUT_DIMS = 8
NAME_MAX_CHARS = 100
# A study name becomes a directory under results_dir and appears in YAML and Python exports.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@,-]*")
_NAME_ALLOWED = (
    f"allowed: 1-{NAME_MAX_CHARS} characters of letters, digits and . _ - + = @ , starting with "
    "a letter or digit (a safe directory name: no /, \\, .., spaces or control characters)"
)


def _short(value: object) -> str:
    text = safe_repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_name(key: str, value: object) -> str:
    """A study/search name that is a safe directory name under results_dir; returns it."""
    if not isinstance(value, str) or not value or len(value) > NAME_MAX_CHARS or not (
        _NAME_RE.fullmatch(value)
    ):
        raise IpuTuneError(f"{key}={_short(value)}: {_NAME_ALLOWED}")
    return value


def check_study_name(key: str, value: object) -> str:
    """A name for a new study: a safe directory name (`check_name`) that is no other study's
    export folder (`<name>@<tag>`) and none of the files kept in results_dir, which the
    study's exports would collide with - some exist only while a worker runs."""
    name = check_name(key, value)
    if (why := reserved_study_name(name)) is not None:
        raise bad_value(key, name, f"{why}; {_NAME_ALLOWED}, not one of those")
    return name


def _bounded(key: str, value: Any, limit: int) -> None:
    if (type(value) is int or (isinstance(value, int) and not isinstance(value, bool))) and (
            value > limit):
        raise IpuTuneError(f"{key}={_short(value)}: must be <= {bound_text(limit)}")


def check_limits(cfg: EvalConfig) -> None:
    """Every integer at most its `LIMITS` bound (and tune-only keys when `cfg` is a TuneConfig)."""
    m = cfg.model
    if m.input_shape is not None and len(m.input_shape) > _MAX_INPUT_DIMS:
        raise bad_value("model.input_shape", list(m.input_shape),
                        f"at most {_MAX_INPUT_DIMS} dimensions")
    for d in m.input_shape or ():
        if d > LIMITS["model.input_shape"]:
            raise IpuTuneError(f"model.input_shape={_short(m.image_shape())}: every "
                               f"dimension must be <= {bound_text(LIMITS['model.input_shape'])}")
    tune = isinstance(cfg, TuneConfig)
    values = [(key, get(cfg), limit) for key, get, limit in (_TUNE_BOUNDS if tune
                                                             else _EVAL_BOUNDS)]
    if isinstance(cfg, TuneConfig) and cfg.sampler.seed is not None and cfg.sampler.seed < 0:
        raise bad_value("sampler.seed", cfg.sampler.seed,
                        f"must be in 0..{bound_text(LIMITS['sampler.seed'])}")
    for key, value, limit in values:
        _bounded(key, value, limit)


def _bounds(*groups: dict[str, int]) -> tuple[tuple[str, Callable[[Any], Any], int], ...]:
    """(key, value getter, bound) of the integers `check_limits` reads, in its order."""
    keys = dict.fromkeys(k for group in groups for k in group if k != "model.input_shape")
    return tuple((key, attrgetter(key), LIMITS[key]) for key in keys)


_EVAL_BOUNDS = _bounds(_OTHER_LIMITS, _KNOB_LIMITS)
_TUNE_BOUNDS = _bounds(_OTHER_LIMITS, _KNOB_LIMITS, _TUNE_LIMITS)


def _check_tune(cfg: TuneConfig) -> None:
    check_name("search.name", cfg.search.name)
    if cfg.study.name is not None:
        check_study_name("study.name", cfg.study.name)
    if cfg.study.n_trials < 1:
        raise bad_value("study.n_trials", cfg.study.n_trials, "must be >= 1")
    if cfg.study.workers < 1:
        raise bad_value("study.workers", cfg.study.workers, "must be >= 1")


def _choice(key: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise bad_value(key, value, "allowed: " + ", ".join(choices), choices)


_Check = tuple[str, Callable[[Any], Any], Callable[[Any], str | None], tuple[str, ...]]


def _checks(knobs: tuple[Knob, ...]) -> tuple[_Check, ...]:
    """(key, value getter, checker, the names a text knob takes) of the knobs that can hold a
    wrong value."""
    return tuple((k.key, attrgetter(k.key), checker(k),
                  tuple(map(str, k.domain or ())) if k.type is str else ())
                 for k in knobs if checker(k) is not never_wrong)


_WORKLOAD_CHECKS = _checks(WORKLOAD_KNOBS)
_PLAN_CHECKS = _checks(PLAN_KNOBS)


def _check_knobs(cfg: EvalConfig, checks: tuple[_Check, ...]) -> None:
    for key, get, check, names in checks:
        value = get(cfg)
        message = check(value)
        if message is not None:
            raise bad_value(key, list(value) if isinstance(value, list) else value, message,
                            names)


def _at_least(key: str, value: float, low: float) -> None:
    if value < low:
        raise bad_value(key, value, f"must be >= {low}")


def validate(cfg: EvalConfig, check_layout: bool = True) -> EvalConfig:
    """Raise `IpuTuneError` naming the first bad key; return `cfg` unchanged otherwise.

    `check_layout=False` skips "stages x replicas = num_ipus": the tuner's starting plan need
    not match the system, since the search chooses stages and replicas.
    """
    check_numbers(cfg)  # inf/nan pass every range check below
    check_strings(cfg)
    if isinstance(cfg, TuneConfig):
        _check_tune(cfg)
    check_limits(cfg)
    m, w, s, p = cfg.model, cfg.workload, cfg.system, cfg.plan
    if not m.name and not m._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    if m.input_shape is not None and (not m.input_shape or any(d < 1 for d in m.input_shape)):
        raise bad_value("model.input_shape", list(m.input_shape), "positive integers")
    if m.num_classes is not None:
        _at_least("model.num_classes", m.num_classes, 1)
    if m.sequence_length is not None:
        _at_least("model.sequence_length", m.sequence_length, 1)
    if m.dataset.sample_bytes is not None:
        _at_least("model.dataset.sample_bytes", m.dataset.sample_bytes, 1)
    if m.dataset.preprocess_s_per_sample is not None:
        _at_least("model.dataset.preprocess_s_per_sample", m.dataset.preprocess_s_per_sample, 0.0)
    _at_least("model.dataset.sequences_per_pack", m.dataset.sequences_per_pack, 1.0)

    _check_knobs(cfg, _WORKLOAD_CHECKS)

    _choice("system.ipu", s.ipu, IPUS)
    if not is_power_of_two(s.num_ipus):
        raise bad_value("system.num_ipus", s.num_ipus, "must be a power of two (1, 2, 4, ...)")
    if s.hosts is not None and not 1 <= s.hosts <= s.num_ipus:
        raise bad_value("system.hosts", s.hosts, f"must be in 1..system.num_ipus={s.num_ipus}")
    if s.host.cpu_cores is not None:
        _at_least("system.host.cpu_cores", s.host.cpu_cores, 1)
    if s.host.network_bytes_per_s is not None and not s.host.network_bytes_per_s > 0:
        raise bad_value("system.host.network_bytes_per_s", s.host.network_bytes_per_s,
                        "must be > 0")

    _check_knobs(cfg, _PLAN_CHECKS)
    _check_instances(p.host_instances, s.servers, p.replication_factor, check_layout)
    if p.ipu_config_carried and not p.from_ipu_config:  # only ever what a checked file held
        raise bad_value("plan.ipu_config_carried", dict(p.ipu_config_carried),
                        "null: it is read from the file of plan.from_ipu_config")
    if len(set(p.pipeline.splits)) != len(p.pipeline.splits):
        raise bad_value("plan.pipeline.splits", list(p.pipeline.splits), "names must be unique")
    _check_per_ipu(p.available_memory_proportion_per_ipu, len(p.pipeline.splits) + 1)
    if p.replicated_tensor_sharding and p.replication_factor < 2:
        raise bad_value(
            "plan.replicated_tensor_sharding", True, "needs plan.replication_factor >= 2"
        )

    if w.mode == "infer" and p.gradient_accumulation != 1:
        raise bad_value(
            "plan.gradient_accumulation", p.gradient_accumulation, "must be 1 for infer"
        )
    if check_layout:
        _check_layout(cfg)
    return cfg


def _check_per_ipu(per_ipu: list[float], stages: int) -> None:
    if per_ipu and len(per_ipu) != stages:
        raise bad_value("plan.available_memory_proportion_per_ipu", list(per_ipu),
                        f"one value per IPU of a replica ({stages}, the pipeline stages), or []"
                        " for plan.available_memory_proportion on every IPU")


def _check_layout(cfg: EvalConfig) -> None:
    """A complete plan fills the system, and PopTorch would compile it (a plan it refuses is
    refused here, not simulated)."""
    p, n = cfg.plan, cfg.system.num_ipus
    stages = len(p.pipeline.splits) + 1
    if stages * p.replication_factor != n:
        raise bad_value(
            "system.num_ipus", n,
            f"must equal pipeline stages ({stages}) x plan.replication_factor "
            f"({p.replication_factor}) = {stages * p.replication_factor}",
        )
    rule = pipeline_minimum(cfg.workload.mode == "train", stages, p.pipeline.schedule)
    if rule is None:
        return
    key, least = rule
    value = get_key(cfg, key)
    if value < least:
        what = "training" if cfg.workload.mode == "train" else "inference"
        raise bad_value(key, value, f"must be >= {least}, the pipeline stages: PopTorch compiles "
                        f"a pipelined {what} program only then (or plan.pipeline.schedule=sharded)")


def at_pipeline_minimum(cfg: EvalConfig, head_stages: int = 0) -> EvalConfig:
    """`cfg`, changed in place: gradient accumulation (inference: device iterations) raised to
    the least PopTorch compiles for its pipeline (`pipeline_minimum`). The search, the what-ifs
    and the remedies draw no plan PopTorch refuses; with a fixed global batch the changed batch
    shows as the search's constraint. `head_stages`: the pipeline stages a tied head placed on
    IPU0 adds after the last one (`ipu_tune.case.head_stages`: PopTorch's
    AutoIncrement makes it a stage of its own)."""
    stages = len(cfg.plan.pipeline.splits) + 1
    rule = pipeline_minimum(cfg.workload.mode == "train", stages + head_stages,
                            cfg.plan.pipeline.schedule)
    if rule is not None:
        set_key(cfg, rule[0], max(get_key(cfg, rule[0]), rule[1]))
    return cfg


def _check_instances(instances: int, hosts: int, replicas: int, check_layout: bool) -> None:
    """PopRun instances (a power of two, knobs.py): PopRun splits the replicas evenly over the
    instances and the instances evenly over the servers; fewer instances than servers run one
    per server."""
    if instances > hosts and instances % hosts:
        raise bad_value("plan.host_instances", instances,
                        f"must be a multiple of system.hosts={hosts} (one or more per server)")
    if check_layout and replicas % instances:
        raise bad_value("plan.host_instances", instances,
                        f"must divide plan.replication_factor={replicas}")


def check_pinned_layout(cfg: EvalConfig, pinned: frozenset[str]) -> None:
    """The layout checks of a search's starting plan: stages and replicas, set on the command
    line or not, fit the system (the search starts from them); those the user pinned also
    divide it."""
    p, n = cfg.plan, cfg.system.num_ipus
    stages = len(p.pipeline.splits) + 1
    splits_pinned = "plan.pipeline.splits" in pinned
    replicas_pinned = "plan.replication_factor" in pinned
    if splits_pinned and (stages > n or n % stages):
        raise bad_value(
            "system.num_ipus", n, f"must be a multiple of the {stages} pipeline stages pinned"
        )
    if replicas_pinned and (p.replication_factor > n or n % p.replication_factor):
        raise bad_value(
            "system.num_ipus", n,
            f"must be a multiple of plan.replication_factor={p.replication_factor}",
        )
    if splits_pinned and replicas_pinned and stages * p.replication_factor != n:
        raise bad_value(
            "system.num_ipus", n,
            f"must equal pipeline stages ({stages}) x plan.replication_factor "
            f"({p.replication_factor}) = {stages * p.replication_factor}",
        )
    # Not pinned, the search may change them, but it starts from them: a replica or a stage
    # more than the IPUs is no plan of this system.
    if p.replication_factor > n:
        raise bad_value("plan.replication_factor", p.replication_factor,
                        f"must be at most system.num_ipus={n} (the starting plan's replicas)")
    if stages > n:
        raise bad_value("plan.pipeline.splits", list(p.pipeline.splits),
                        f"at most {n - 1} splits: {stages} stages on system.num_ipus={n}")


_AMP = "plan.available_memory_proportion"
_AMP_PER_IPU = "plan.available_memory_proportion_per_ipu"


def at_one_proportion_if_moved(cfg: EvalConfig, changed: Collection[str]) -> EvalConfig:
    """`cfg`, changed in place: its per-IPU available memory proportions dropped (so
    `plan.available_memory_proportion` runs on every IPU) when they no longer describe its
    plan: the one proportion is among the `changed` keys, or the list's length is no longer
    the stage count. The search, the what-ifs and the remedies move plans this way."""
    plan = cfg.plan
    stages = len(plan.pipeline.splits) + 1
    per_ipu = plan.available_memory_proportion_per_ipu
    if per_ipu and (_AMP in changed or len(per_ipu) != stages):
        plan.available_memory_proportion_per_ipu = []
    return cfg
