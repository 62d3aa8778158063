"""Calibration of the simulator against measured runs: a client of `ipu_tune.simulator`.

`default_points()` are the package's measured runs (`points.yaml`, from Graphcore's public
material, each row with its source); `predict` simulates them; `fit_constants` refits the
simulator's free constants (`ipu_tune.simulator.FITTED`) by least squares in log space
(`python -m ipu_tune calibrate`); `check_table` and `error_summary` say how far
the predictions are from what was measured (`calibrate --check`).
"""

from ipu_tune.calibration._check import check_table, error_summary, memory_agreement
from ipu_tune.calibration._fit import (
    FitResult,
    Prediction,
    fit_constants,
    loss,
    nelder_mead,
    predict,
)
from ipu_tune.calibration._points import POINTS_FILE, CalibrationPoint, default_points, load_points

__all__ = [
    "POINTS_FILE",
    "CalibrationPoint",
    "FitResult",
    "Prediction",
    "check_table",
    "default_points",
    "error_summary",
    "fit_constants",
    "load_points",
    "loss",
    "memory_agreement",
    "nelder_mead",
    "predict",
]
