"""Fitting the free constants to measured runs (least squares in log space, Nelder-Mead).

A measured run is an evaluate-schema config plus what was measured (`samples_per_s`,
`device_cycles` of one call, `result: fits|out_of_memory`); `calibration_points.yaml` holds the
package's own (seed tutorial, pipelining tutorial, MLPerf). The loss sums, per row,
weight x log(predicted / measured)^2 for rates and cycles, and a hinge on the memory ratio
(most-loaded IPU or tile over its limit) when the prediction contradicts `result`. The fitted
constants are those of `FITTED` (or a chosen subset), searched in log space within their bounds.
No point is special-cased: every row goes through the same `simulate`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ipu_tune.config import EvalConfig, load_config
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.hardware import System, make_system
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.simulator._constants import DEFAULT_CONSTANTS, FITTED, SimConstants
from ipu_tune.simulator._result import SimResult
from ipu_tune.simulator._simulate import simulate

__all__ = [
    "POINTS_FILE",
    "CalibrationPoint",
    "FitResult",
    "Prediction",
    "default_points",
    "fit_constants",
    "load_points",
    "loss",
    "nelder_mead",
    "predict",
]

POINTS_FILE = Path(__file__).with_name("calibration_points.yaml")
_MEASURED = ("samples_per_s", "device_cycles", "result")
_META = ("name", "source", "weight", "tolerance")
_RESULTS = ("fits", "out_of_memory")


@dataclass(frozen=True)
class CalibrationPoint:
    name: str
    config: EvalConfig
    samples_per_s: float | None = None
    device_cycles: float | None = None
    result: str | None = None  # fits | out_of_memory
    weight: float = 1.0
    tolerance: float | None = None  # relative; used by validation, not by the fit


def _number(row: str, key: str, value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise bad_value(f"{row}.{key}", value, "must be a number") from None
    if not out > 0.0:
        raise bad_value(f"{row}.{key}", value, "must be positive")
    return out


def _point(index: int, row: Mapping[str, Any]) -> CalibrationPoint:
    name = str(row.get("name") or f"row{index + 1}")
    result = row.get("result")
    if result in ("", None):
        result = None
    elif result not in _RESULTS:
        raise bad_value(f"{name}.result", result, "allowed: fits, out_of_memory")
    config = {k: v for k, v in row.items() if k not in _MEASURED and k not in _META}
    point = CalibrationPoint(
        name=name,
        config=load_config(config),
        samples_per_s=_number(name, "samples_per_s", row.get("samples_per_s")),
        device_cycles=_number(name, "device_cycles", row.get("device_cycles")),
        result=result,
        weight=_number(name, "weight", row.get("weight")) or 1.0,
        tolerance=_number(name, "tolerance", row.get("tolerance")),
    )
    if point.samples_per_s is None and point.device_cycles is None and point.result is None:
        raise IpuTuneError(f"{name}: nothing measured; give samples_per_s, device_cycles or result")
    return point


def _undot(flat: Mapping[str, str]) -> dict[str, Any]:
    """A CSV row with dotted headers (plan.precision) as a nested mapping; cells parse as YAML
    scalars or flow lists ([layer3.8], [3, 224, 224])."""
    out: dict[str, Any] = {}
    for key, cell in flat.items():
        if key is None or cell is None or str(cell).strip() == "":
            continue
        value = yaml.safe_load(cell)
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def load_points(source: str | Path | Iterable[Mapping[str, Any]]) -> list[CalibrationPoint]:
    """Rows from a YAML file (a list, or a mapping with `points:`), a CSV with dotted column
    names, or an iterable of mappings."""
    rows: list[Mapping[str, Any]]
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            text = path.read_text()
        except OSError as exc:
            raise IpuTuneError(f"{str(path)!r}: cannot be read ({exc.strerror})") from None
        if path.suffix.lower() == ".csv":
            rows = [_undot(r) for r in csv.DictReader(text.splitlines())]
        else:
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError:
                raise IpuTuneError(f"{str(path)!r}: not valid YAML") from None
            if isinstance(data, Mapping):
                data = data.get("points")
            if not isinstance(data, list):
                raise IpuTuneError(f"{str(path)!r}: expected a list of rows or a `points:` list")
            rows = data
    else:
        rows = list(source)
    points = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise IpuTuneError(f"row{i + 1}: expected a mapping, got {type(row).__name__}")
        points.append(_point(i, row))
    if not points:
        raise IpuTuneError("calibration: no measured rows")
    return points


def default_points() -> list[CalibrationPoint]:
    """The package's measured runs (`calibration_points.yaml`)."""
    return load_points(POINTS_FILE)


@dataclass(frozen=True)
class _Case:
    point: CalibrationPoint
    profile: ModelProfile
    system: System
    plan: ExecutionPlan


@dataclass(frozen=True)
class Prediction:
    point: CalibrationPoint
    result: SimResult
    samples_per_s: float  # as if it fitted (the rate of its step), for the fit
    device_cycles: float
    memory_ratio: float  # most-loaded IPU or tile over its limit (> 1: does not fit)

    def errors(self) -> dict[str, float]:
        """Relative errors predicted / measured - 1 of the measured rates and cycles."""
        out: dict[str, float] = {}
        if self.point.samples_per_s is not None:
            out["samples_per_s"] = self.samples_per_s / self.point.samples_per_s - 1.0
        if self.point.device_cycles is not None:
            out["device_cycles"] = self.device_cycles / self.point.device_cycles - 1.0
        return out


def _cases(points: Sequence[CalibrationPoint]) -> list[_Case]:
    from ipu_tune.models import profile_model
    from ipu_tune.plan import stage_starts

    cases = []
    for p in points:
        cfg = p.config
        profile = profile_model(cfg.model)
        plan = plan_from_config(cfg)
        stage_starts(plan, profile)
        system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
        cases.append(_Case(p, profile, system, plan))
    return cases


def _predict(cases: Sequence[_Case], constants: SimConstants) -> list[Prediction]:
    out = []
    for case in cases:
        r = simulate(case.profile, case.system, case.plan, constants)
        ratio = max(
            max(m.total_bytes / m.limit_bytes, m.max_tile_bytes / m.tile_limit_bytes)
            for m in r.memory
        )
        out.append(Prediction(
            point=case.point,
            result=r,
            samples_per_s=r.samples_per_step / r.step_time_s,
            device_cycles=float(r.extras["device_call_cycles"]),
            memory_ratio=ratio,
        ))
    return out


def predict(
    points: Sequence[CalibrationPoint], constants: SimConstants = DEFAULT_CONSTANTS
) -> list[Prediction]:
    return _predict(_cases(points), constants)


def loss(predictions: Iterable[Prediction]) -> float:
    total = 0.0
    for p in predictions:
        w = p.point.weight
        if p.point.samples_per_s is not None:
            total += w * math.log(p.samples_per_s / p.point.samples_per_s) ** 2
        if p.point.device_cycles is not None:
            total += w * math.log(p.device_cycles / p.point.device_cycles) ** 2
        if p.point.result is not None:
            fits = p.memory_ratio <= 1.0
            if fits != (p.point.result == "fits"):
                total += w * (math.log(p.memory_ratio) ** 2 + 0.01)
    return total


def nelder_mead(
    f: Callable[[list[float]], float],
    x0: Sequence[float],
    step: float = 0.3,
    max_evals: int = 2000,
    tol: float = 1e-10,
) -> tuple[list[float], float]:
    """Minimise `f` from `x0` (Nelder & Mead 1965; standard coefficients 1, 2, 0.5, 0.5)."""
    n = len(x0)
    simplex = [list(x0)] + [[x + (step if i == j else 0.0) for j, x in enumerate(x0)]
                            for i in range(n)]
    values = [f(x) for x in simplex]
    evals = n + 1
    while evals < max_evals:
        order = sorted(range(n + 1), key=values.__getitem__)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] <= tol:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]

        def toward(t: float, worst: list[float] = worst,
                   centroid: list[float] = centroid) -> list[float]:
            return [c + t * (c - w) for c, w in zip(centroid, worst, strict=True)]

        reflected = toward(1.0)
        fr = f(reflected)
        evals += 1
        if fr < values[0]:
            expanded = toward(2.0)
            fe = f(expanded)
            evals += 1
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = toward(0.5) if fr < values[-1] else toward(-0.5)
            fc = f(contracted)
            evals += 1
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[b + 0.5 * (x - b) for b, x in zip(best, s, strict=True)]
                                    for s in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
                evals += n
    i = min(range(n + 1), key=values.__getitem__)
    return simplex[i], values[i]


@dataclass(frozen=True)
class FitResult:
    constants: SimConstants
    names: tuple[str, ...]
    loss_before: float
    loss_after: float
    predictions: tuple[Prediction, ...]


def fit_constants(
    points: Sequence[CalibrationPoint],
    base: SimConstants = DEFAULT_CONSTANTS,
    names: Sequence[str] | None = None,
    max_evals: int = 3000,
    restarts: int = 2,
) -> FitResult:
    """Refit `names` (default: all of `FITTED`) to `points`, starting from `base`."""
    chosen = tuple(names) if names is not None else tuple(FITTED)
    for name in chosen:
        if name not in FITTED:
            raise bad_value("calibrate.fit", name, "allowed: " + ", ".join(FITTED))
    cases = _cases(points)
    lows = [math.log(FITTED[k][0]) for k in chosen]
    highs = [math.log(FITTED[k][1]) for k in chosen]

    def constants_at(x: Sequence[float]) -> SimConstants:
        clipped = [min(max(v, lo), hi) for v, lo, hi in zip(x, lows, highs, strict=True)]
        return base.with_values({k: math.exp(v) for k, v in zip(chosen, clipped, strict=True)})

    def objective(x: list[float]) -> float:
        # Outside the bounds: the clipped value plus a penalty steering back inside.
        out = sum(max(0.0, lo - v) + max(0.0, v - hi) for v, lo, hi in zip(x, lows, highs,
                                                                              strict=True))
        return loss(_predict(cases, constants_at(x))) + out

    x = [math.log(getattr(base, k)) for k in chosen]
    before = objective(x)
    best = before
    for attempt in range(restarts + 1):
        x, best = nelder_mead(objective, x, step=0.3 / (attempt + 1), max_evals=max_evals)
    fitted = constants_at(x)
    return FitResult(
        constants=fitted,
        names=chosen,
        loss_before=before,
        loss_after=best,
        predictions=tuple(_predict(cases, fitted)),
    )
