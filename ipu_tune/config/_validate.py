"""Range and choice checks of the schema; plan-versus-model checks live in `ipu_tune.plan`."""

from __future__ import annotations

from ipu_tune.config._schema import IPUS, EvalConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.knobs import (
    PLAN_KNOBS,
    WORKLOAD_KNOBS,
    Knob,
    get_key,
    is_power_of_two,
    valid_io_tiles,
)

__all__ = ["check_pinned_layout", "is_power_of_two", "valid_io_tiles", "validate"]


def _choice(key: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise bad_value(key, value, "allowed: " + ", ".join(choices))


def _check_knobs(cfg: EvalConfig, knobs: tuple[Knob, ...]) -> None:
    for k in knobs:
        value = get_key(cfg, k.key)
        message = k.problem(value)
        if message is not None:
            raise bad_value(k.key, list(value) if isinstance(value, list) else value, message)


def _at_least(key: str, value: float, low: float) -> None:
    if value < low:
        raise bad_value(key, value, f"must be >= {low}")


def validate(cfg: EvalConfig, check_layout: bool = True) -> EvalConfig:
    """Raise `IpuTuneError` naming the first bad key; return `cfg` unchanged otherwise.

    `check_layout=False` skips "stages x replicas = num_ipus": the tuner's starting plan need
    not match the system, since the search chooses stages and replicas.
    """
    m, w, s, p = cfg.model, cfg.workload, cfg.system, cfg.plan
    if not m.name and not m._target_:
        raise IpuTuneError("model.name: missing; give a zoo name or model._target_")
    if not m.input_shape or any(d < 1 for d in m.input_shape):
        raise bad_value("model.input_shape", list(m.input_shape), "positive integers")
    _at_least("model.num_classes", m.num_classes, 1)
    if m.sequence_length is not None:
        _at_least("model.sequence_length", m.sequence_length, 1)
    if m.dataset.sample_bytes is not None:
        _at_least("model.dataset.sample_bytes", m.dataset.sample_bytes, 1)
    if m.dataset.preprocess_s_per_sample is not None:
        _at_least("model.dataset.preprocess_s_per_sample", m.dataset.preprocess_s_per_sample, 0.0)

    _check_knobs(cfg, WORKLOAD_KNOBS)

    _choice("system.ipu", s.ipu, IPUS)
    if not is_power_of_two(s.num_ipus):
        raise bad_value("system.num_ipus", s.num_ipus, "must be a power of two (1, 2, 4, ...)")
    _at_least("system.hosts", s.hosts, 1)
    if s.hosts > s.num_ipus:
        raise bad_value("system.hosts", s.hosts, f"at most system.num_ipus={s.num_ipus}")
    if s.host.cpu_cores is not None:
        _at_least("system.host.cpu_cores", s.host.cpu_cores, 1)
    if s.host.network_bytes_per_s is not None and not s.host.network_bytes_per_s > 0:
        raise bad_value("system.host.network_bytes_per_s", s.host.network_bytes_per_s,
                        "must be > 0")

    _check_knobs(cfg, PLAN_KNOBS)
    _check_instances(p.host_instances, s.hosts, p.replication_factor, check_layout)
    if len(set(p.pipeline.splits)) != len(p.pipeline.splits):
        raise bad_value("plan.pipeline.splits", list(p.pipeline.splits), "names must be unique")
    if p.replicated_tensor_sharding and p.replication_factor < 2:
        raise bad_value(
            "plan.replicated_tensor_sharding", True, "needs plan.replication_factor >= 2"
        )

    stages = len(p.pipeline.splits) + 1
    if check_layout and stages * p.replication_factor != s.num_ipus:
        raise bad_value(
            "system.num_ipus",
            s.num_ipus,
            f"must equal pipeline stages ({stages}) x plan.replication_factor "
            f"({p.replication_factor}) = {stages * p.replication_factor}",
        )
    if w.mode == "infer" and p.gradient_accumulation != 1:
        raise bad_value(
            "plan.gradient_accumulation", p.gradient_accumulation, "must be 1 for infer"
        )
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
    """The layout checks that still hold when the user pinned splits or replicas for a search."""
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
