"""Objectives and constraints of a trial, computed from the simulated result.

Objectives (`search.objectives`):

- ``throughput`` (maximise): samples/s of the whole system (`SimResult.throughput`).
- ``memory`` (minimise): peak bytes on the fullest IPU.
- ``memory_headroom`` (maximise): share of the fullest IPU's memory left free, 1 - peak/limit.
- ``latency`` (minimise): seconds from a call's inputs on the host to its results on the
  host (`SimResult.latency_s`: the per-call cost, the stream copies and the device passes of
  its device iterations x micro-batch samples; outputs come back when the call ends).
- ``changes`` (minimise): plan knobs that differ from the user's own plan, ties broken by
  throughput: value = changes + 1 / (1 + throughput / 1000 samples/s). The integer part is
  the count; the fraction, below 1, only orders plans with the same count.

Constraints (<= 0 feasible, > 0 violated, larger = further off; Optuna's convention):

- ``memory``: max over IPUs of max(bytes / limit, fullest tile / tile limit) - 1.
- ``global_batch``: |micro-batch x GA x replicas - target| / target, when a target is set.
- ``throughput_floor``: (floor - throughput) / floor, when a floor is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipu_tune.config import EvalConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS, ModelFacts, get_key, knob, moot_keys, rate_text, shown
from ipu_tune.simulator import SimResult

__all__ = [
    "CHANGE_KEYS",
    "DIRECTIONS",
    "OBJECTIVES",
    "Objective",
    "change_list",
    "count_changes",
    "get_key",
    "memory_constraint",
    "metric_names",
    "objective_value",
    "show_value",
]


@dataclass(frozen=True)
class Objective:
    """How an objective is named, measured and shown (Optuna metric name = `metric`)."""

    name: str  # as in search.objectives
    direction: str  # maximize | minimize
    metric: str  # Optuna metric name: the quantity and the unit of the stored value
    title: str  # the quantity in words
    unit: str  # unit of the shown value
    scale: float  # shown = stored x scale
    fmt: Callable[[float], str]  # shown value without the unit

    def show(self, value: float) -> str:
        """`value` (as stored) with its unit, e.g. ``1.54 ms``."""
        text = self.fmt(value * self.scale)
        return f"{text} {self.unit}" if self.unit else text

    def axis(self) -> str:
        """Axis title: the quantity and the shown unit."""
        return f"{self.title} ({self.unit})" if self.unit else self.title


def _int_changes(value: float) -> str:
    n = int(value)  # the integer part is the count; the fraction is a throughput tie-break
    return f"{n} change" + ("" if n == 1 else "s")


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("throughput", "maximize", "throughput [samples/s]", "throughput", "samples/s",
              1.0, lambda v: rate_text(v).removesuffix(" samples/s")),
    Objective("memory", "minimize", "peak memory per IPU [bytes]", "peak memory per IPU", "MB",
              1e-6, lambda v: f"{v:,.1f}"),
    Objective("memory_headroom", "maximize", "memory headroom [fraction of IPU SRAM]",
              "memory headroom of the fullest IPU", "%", 100.0, lambda v: f"{v:.1f}"),
    Objective("latency", "minimize", "latency per call [s]", "latency per call",
              "ms", 1e3, lambda v: f"{v:,.3f}"),
    Objective("changes", "minimize", "knobs changed [count + throughput tie-break < 1]",
              "knobs changed from your plan", "", 1.0, _int_changes),
)}


def metric_names(names: list[str]) -> list[str]:
    """Optuna metric names of objectives `names` (study.set_metric_names)."""
    return [OBJECTIVES[n].metric for n in names]


def show_value(name: str, value: float) -> str:
    """`value` of objective `name` with its unit; an unknown name shows the number."""
    o = OBJECTIVES.get(name)
    return o.show(value) if o is not None else f"{value:.6g}"

DIRECTIONS = {o.name: o.direction for o in OBJECTIVES.values()}

# Throughput scale of the `changes` tie-break (any positive value orders plans the same).
_CHANGES_THROUGHPUT_SCALE = 1000.0

# What counts as one change in the `fit` search (declared per knob in `ipu_tune.knobs`).
CHANGE_KEYS = tuple(k.key for k in KNOBS if k.change)


def _changed(cfg: EvalConfig, user: EvalConfig,
             model: ModelFacts | None) -> list[tuple[str, Any, Any]]:
    out: list[tuple[str, Any, Any]] = []
    moot = moot_keys(cfg, model) | moot_keys(user, model)
    for key in CHANGE_KEYS:
        if key in moot:  # a knob one of the plans does not run is no change
            continue
        a, b = get_key(cfg, key), get_key(user, key)
        if isinstance(a, list | tuple) and isinstance(b, list | tuple):
            a, b = list(a), list(b)
        if a != b:
            out.append((key, b, a))
    return out


def count_changes(cfg: EvalConfig, user: EvalConfig, model: ModelFacts | None = None) -> int:
    """Knobs of `cfg` that differ from the user's plan (a whole split list counts once).

    A knob either plan does not run (`knobs.moot_keys`: the schedule of a one-stage plan, the
    partials type of an fp32 model, ...) is not counted. `model`: the model profile's facts.
    """
    return len(_changed(cfg, user, model))


def change_list(cfg: EvalConfig, user: EvalConfig, model: ModelFacts | None = None) -> list[str]:
    """The changes `count_changes` counts, as ``precision 32.32 -> 16.16``."""
    return [f"{knob(k).label or k} {shown(b)} -> {shown(a)}"
            for k, b, a in _changed(cfg, user, model)]


def memory_constraint(result: SimResult) -> float:
    ratio = max((m.fullness for m in result.memory), default=0.0) - 1.0
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
        return float(result.latency_s)
    if name == "changes":
        return changes + 1.0 / (1.0 + result.throughput / _CHANGES_THROUGHPUT_SCALE)
    raise IpuTuneError(f"search.objectives: {name!r} unknown; allowed: " + ", ".join(DIRECTIONS))
