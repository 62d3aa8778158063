"""Objectives and constraints of a trial, computed from the simulated result.

Objectives (`search.objectives`):

- ``throughput`` (maximise): samples/s of the whole system (`SimResult.throughput`).
- ``memory`` (minimise): peak bytes on the fullest IPU.
- ``memory_headroom`` (maximise): share of the fullest IPU's memory left free, 1 - peak/limit.
- ``latency`` (minimise): seconds per micro-batch pass (`SimResult.step_time_s`, inference).
- ``changes`` (minimise): plan knobs that differ from the user's own plan, ties broken by
  throughput: value = changes + 1 / (1 + throughput / 1000 samples/s). The integer part is
  the count; the fraction, below 1, only orders plans with the same count.

Constraints (<= 0 feasible, > 0 violated, larger = further off; Optuna's convention):

- ``memory``: max over IPUs of max(bytes / limit, fullest tile / tile limit) - 1.
- ``global_batch``: |micro-batch x GA x replicas - target| / target, when a target is set.
- ``throughput_floor``: (floor - throughput) / floor, when a floor is set.
"""

from __future__ import annotations

from ipu_tune.config import EvalConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS, get_key, knob
from ipu_tune.simulator import SimResult

__all__ = [
    "CHANGE_KEYS",
    "DIRECTIONS",
    "count_changes",
    "get_key",
    "memory_constraint",
    "objective_value",
]

DIRECTIONS = {
    "throughput": "maximize",
    "memory": "minimize",
    "memory_headroom": "maximize",
    "latency": "minimize",
    "changes": "minimize",
}

# Throughput scale of the `changes` tie-break (any positive value orders plans the same).
_CHANGES_THROUGHPUT_SCALE = 1000.0

# What counts as one change in the `fit` search (declared per knob in `ipu_tune.knobs`).
CHANGE_KEYS = tuple(k.key for k in KNOBS if k.change)


def count_changes(cfg: EvalConfig, user: EvalConfig) -> int:
    """Knobs of `cfg` that differ from the user's plan (a whole split list counts once).

    The schedule of a one-stage plan is moot and not counted.
    """
    n = 0
    for key in CHANGE_KEYS:
        a, b = get_key(cfg, key), get_key(user, key)
        if knob(key).condition == "pipelined" and not (cfg.plan.pipeline.splits
                                                    and user.plan.pipeline.splits):
            continue
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            a, b = list(a), list(b)
        if a != b:
            n += 1
    return n


def memory_constraint(result: SimResult) -> float:
    ratio = max(
        (max(m.total_bytes / m.limit_bytes, m.max_tile_bytes / m.tile_limit_bytes)
         for m in result.memory if m.limit_bytes > 0 and m.tile_limit_bytes > 0),
        default=0.0,
    ) - 1.0
    # The simulator's verdict decides; the ratio only says how far off a failing plan is
    # (a plan can also fail for a reason the totals do not show, e.g. I/O tiles too small).
    return min(ratio, 0.0) if result.fits else max(ratio, 1e-3)


def objective_value(name: str, result: SimResult, changes: int = 0) -> float:
    if name == "throughput":
        return float(result.throughput)
    if name == "memory":
        return float(max(result.memory_per_ipu, default=0))
    if name == "memory_headroom":
        return 1.0 - max((m.total_bytes / m.limit_bytes for m in result.memory
                          if m.limit_bytes > 0), default=0.0)
    if name == "latency":
        return float(result.step_time_s)
    if name == "changes":
        return changes + 1.0 / (1.0 + result.throughput / _CHANGES_THROUGHPUT_SCALE)
    raise IpuTuneError(f"search.objectives: {name!r} unknown; allowed: " + ", ".join(DIRECTIONS))
