"""Fitting the simulator's free constants to measured runs (least squares in log space,
Nelder-Mead). A client of the simulator: it builds each row's case (profile, system, plan) with
`ipu_tune.case.build_case`, as the API and the tuner do, and calls the public `simulate`.

The loss sums, per row, weight x log(predicted / measured)^2 for rates and cycles, and a hinge
on the memory ratio (most-loaded IPU or tile over its limit) when the prediction contradicts
`result`. The fitted constants are those of `FITTED` (or a chosen subset), searched in log space
within their bounds. No point is special-cased: every row goes through the same `simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ipu_tune.calibration._points import CalibrationPoint, row_named
from ipu_tune.case import Case, build_case
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    FITTED,
    REFITTABLE,
    SimConstants,
    SimResult,
    simulate,
)

__all__ = [
    "FitResult",
    "Prediction",
    "fit_constants",
    "loss",
    "nelder_mead",
    "predict",
]


@dataclass(frozen=True)
class _Case:
    point: CalibrationPoint
    case: Case


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
    out = []
    for p in points:
        with row_named(p.name):  # a split that is no block of the model, ...
            out.append(_Case(p, build_case(p.config)))
    return out


def _predict(cases: Sequence[_Case], constants: SimConstants) -> list[Prediction]:
    out = []
    for case in cases:
        c = case.case
        r = simulate(c.profile, c.system, c.plan, constants)
        ratio = max(m.fullness for m in r.memory)
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
    names: tuple[str, ...]  # the constants refitted
    loss_before: float
    loss_after: float
    predictions: tuple[Prediction, ...]
    # Constants asked for (all of FITTED by default) that no row's measured figure depends on:
    # left as they were, since a fit would move them by chance and carry that to other runs.
    unmoved: tuple[str, ...] = ()


def _figures(p: Prediction) -> list[float]:
    """The predicted figures of a row that its measurement can compare."""
    out = []
    if p.point.samples_per_s is not None:
        out.append(p.samples_per_s)
    if p.point.device_cycles is not None:
        out.append(p.device_cycles)
    if p.point.result is not None:
        out.append(p.memory_ratio)
    return out


def _moved(cases: Sequence[_Case], base: SimConstants, names: Sequence[str]) -> tuple[str, ...]:
    """The constants of `names` that some row's measured figure depends on: halving or
    doubling it changes one."""
    before = [_figures(p) for p in _predict(cases, base)]
    out = []
    for name in names:
        value = getattr(base, name)
        for factor in (0.5, 2.0):
            after = _predict(cases, base.with_values({name: value * factor}))
            if any(not math.isclose(a, b, rel_tol=1e-9) for row, p in zip(before, after,
                   strict=True) for a, b in zip(row, _figures(p), strict=True)):
                out.append(name)
                break
    return tuple(out)


def fit_constants(
    points: Sequence[CalibrationPoint],
    base: SimConstants = DEFAULT_CONSTANTS,
    names: Sequence[str] | None = None,
    max_evals: int = 3000,
    restarts: int = 2,
) -> FitResult:
    """Refit `names` (default: all of `FITTED`; any of `REFITTABLE`) to `points`, starting from
    `base`. A constant no row depends on is left as it was (`FitResult.unmoved`); one named
    in `names` is refused."""
    asked = tuple(names) if names is not None else tuple(FITTED)
    for name in asked:
        if name not in REFITTABLE:
            raise bad_value("calibrate.fit", name, f"allowed: {', '.join(REFITTABLE)}", REFITTABLE)
    cases = _cases(points)
    chosen = _moved(cases, base, asked)
    unmoved = tuple(n for n in asked if n not in chosen)
    if names is not None and unmoved:
        raise bad_value("calibrate.fit", ",".join(unmoved),
                        "no row's measured figure depends on it; allowed: constants a row "
                        "depends on (infer_call_overhead_s needs inference rows, "
                        "preprocess_s_per_sample rows with a host data pipeline)")
    if not chosen:
        raise bad_value("calibrate.fit", ",".join(asked),
                        "no row's measured figure depends on any of these constants")
    if len(points) < len(chosen):
        # With fewer rows than constants, any constants reproduce the rows and the fit says
        # nothing about other runs.
        raise IpuTuneError(
            f"calibrate: {len(points)} measured row{'s' if len(points) != 1 else ''} for "
            f"{len(chosen)} constants ({', '.join(chosen)}): a fit needs at least "
            f"{len(chosen)} rows; add rows, add --defaults to fit with the package's own runs "
            "too, or refit fewer constants with --fit NAME,...")
    lows = [math.log(REFITTABLE[k][0]) for k in chosen]
    highs = [math.log(REFITTABLE[k][1]) for k in chosen]

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
        unmoved=unmoved,
    )
