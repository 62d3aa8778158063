"""How far the simulator is from measured runs, without refitting anything.

`check_table` lays out each prediction of `predict` beside what was measured; `error_summary`
gives, per model and workload mode and over all rows, the median of the absolute samples/s
errors and the worst one (signed), the figures a held-out comparison is judged by; memory rows
count as right when the prediction (fits or out of memory) is what was measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ipu_tune.calibration._fit import Prediction
from ipu_tune.config import EvalConfig
from ipu_tune.knobs import rate_text

__all__ = ["check_table", "error_summary", "memory_agreement"]

_COLUMNS = ["row", "model", "mode", "system", "measured", "predicted", "error_pct"]


def _model_label(cfg: EvalConfig) -> str:
    """The model as rows are grouped: a Transformers type or config file, a zoo name, else
    its factory."""
    hf = cfg.model.hf
    if hf.model_type:
        return f"hf:{hf.model_type}"
    if hf.config_file:
        return f"hf:{Path(hf.config_file).parent.name or Path(hf.config_file).name}"
    return cfg.model.name or cfg.model._target_ or "model"


def _cycles_text(cycles: float) -> str:
    """Cycles in millions to 0.1, or whole below 100,000 (1,000.5 cycles is no "0.0 M")."""
    return f"{cycles / 1e6:,.1f} M cycles" if cycles >= 1e5 else f"{cycles:,.0f} cycles"


def _rows(p: Prediction) -> list[dict[str, object]]:
    cfg, point = p.point.config, p.point
    fits = p.memory_ratio <= 1.0
    nan = float("nan")
    # A measured rate or cycle count means the plan ran, so it fitted.
    base = {"row": point.name, "model": _model_label(cfg), "mode": cfg.workload.mode,
            "system": f"{cfg.system.num_ipus} x {cfg.system.ipu}", "memory_right": fits,
            "fullest_memory_ratio": p.memory_ratio}
    out: list[dict[str, object]] = []
    errors = p.errors()
    # A run that ran, predicted out of memory: the simulator says it does not run at all (0
    # samples/s, error -100 %); the rate of its step is shown beside, for what it is.
    if point.samples_per_s is not None:
        rate = p.samples_per_s if fits else 0.0
        out.append({**base, "measured": rate_text(point.samples_per_s),
                    "predicted": rate_text(rate) if fits else
                    f"out of memory (its step alone: {rate_text(p.samples_per_s)})",
                    "error_pct": 100 * errors["samples_per_s"] if fits else -100.0,
                    "kind": "samples_per_s", "measured_value": point.samples_per_s,
                    "predicted_value": rate})
    if point.device_cycles is not None:
        cycles = p.device_cycles if fits else 0.0
        out.append({**base, "measured": _cycles_text(point.device_cycles),
                    "predicted": _cycles_text(cycles) if fits else
                    f"out of memory (its call alone: {_cycles_text(p.device_cycles)})",
                    "error_pct": 100 * errors["device_cycles"] if fits else -100.0,
                    "kind": "device_cycles", "measured_value": point.device_cycles,
                    "predicted_value": cycles})
    if point.result is not None:
        verdict = "fits" if fits else "out_of_memory"
        fullest = f"fullest IPU or tile at {100 * p.memory_ratio:.0f}% of its limit"
        out.append({**base, "measured": point.result, "predicted": f"{verdict} ({fullest})",
                    "error_pct": nan, "kind": "memory", "memory_right": verdict == point.result,
                    "measured_value": nan, "predicted_value": nan})
    return out


def check_table(predictions: Sequence[Prediction]) -> pd.DataFrame:
    """One line per measured figure of each row: samples/s, device cycles, fits or not.

    `measured`/`predicted` are the figures as text with their unit; `measured_value` and
    `predicted_value` the numbers (samples/s, or cycles; NaN on memory lines); `error_pct`
    predicted / measured - 1 in percent (NaN on memory lines); `kind` which figure;
    `fullest_memory_ratio` the most-loaded IPU or tile over its limit (> 1: does not fit);
    `memory_right` whether the fit/out-of-memory prediction is what was measured (a row with a
    measured rate or cycle count ran, so it fitted)."""
    lines = [line for p in predictions for line in _rows(p)]
    return pd.DataFrame(lines, columns=[*_COLUMNS, "kind", "measured_value", "predicted_value",
                                        "fullest_memory_ratio", "memory_right"])


def _worst(errors: pd.Series) -> float:
    """The error of largest magnitude, with its sign."""
    return float(max(errors, key=abs))


def error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Samples/s errors per (model, mode) and over all rows: rows, median |error| and the
    worst error (signed), in percent."""
    rates = table[table["kind"] == "samples_per_s"]
    groups = [((model, mode), g) for (model, mode), g in rates.groupby(["model", "mode"])]
    if len(groups) != 1:
        groups.append((("all", ""), rates))
    summary = [{"model": model, "mode": mode, "rows": len(g),
                "median_abs_error_pct": float(g["error_pct"].abs().median()),
                "worst_error_pct": _worst(g["error_pct"])}
               for (model, mode), g in groups if len(g)]
    return pd.DataFrame(summary, columns=["model", "mode", "rows", "median_abs_error_pct",
                                          "worst_error_pct"])


def memory_agreement(table: pd.DataFrame) -> tuple[int, int]:
    """(rows whose fit/out-of-memory prediction is what was measured, rows): every row counts
    once; a row with a measured figure ran, so it was measured to fit."""
    per_row = table.groupby("row", sort=False)["memory_right"].all()
    return int(per_row.sum()), len(per_row)
