"""Measured runs: loading the rows the calibration fits and validates against.

A measured run is an evaluate-schema config plus what was measured (`samples_per_s`,
`device_cycles` of one call, `result: fits|out_of_memory`); `points.yaml` holds the package's
own (seed tutorial, pipelining tutorial, MLPerf). Rows come from YAML, CSV (dotted headers) or
mappings; bad rows raise `IpuTuneError` naming the row and key.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipu_tune.config import EvalConfig, load_config, parse_yaml, read_text, read_yaml
from ipu_tune.errors import IpuTuneError, bad_value, bound_text, did_you_mean, key_name

__all__ = ["POINTS_FILE", "CalibrationPoint", "default_points", "load_points"]

POINTS_FILE = Path(__file__).with_name("points.yaml")
_MEASURED = ("samples_per_s", "device_cycles", "result")
_META = ("name", "source", "weight", "tolerance")
_RESULTS = ("fits", "out_of_memory")
# The config's sections a row may set (as `evaluate` reads a file), and its provenance.
_CONFIG = (*sorted(f.name for f in dataclasses.fields(EvalConfig)), "ipu_tune")


@dataclass(frozen=True)
class CalibrationPoint:
    name: str
    config: EvalConfig
    samples_per_s: float | None = None
    device_cycles: float | None = None
    result: str | None = None  # fits | out_of_memory
    weight: float = 1.0
    tolerance: float | None = None  # relative; used by validation, not by the fit


# What a measured run can have given, each figure's lowest and highest: a figure outside is a
# typo (1e-300 samples/s makes a relative error of 10^300 %, or inf), not a run.
# - samples_per_s: 0.001 (one sample in 1,000 s) to 10^9 (a thousand times an IPU-POD's best);
# - device_cycles: 1,000 (one call is at least a compute set's sync and exchange) to 10^15
#   (nine days of one call at 1.33 GHz);
# - weight: 10^-6 to 10^6 times a row's default 1 in the fit; tolerance: up to 10 (1,000 %).
_RANGES = {"samples_per_s": (1e-3, 1e9), "device_cycles": (1e3, 1e15),
           "weight": (1e-6, 1e6), "tolerance": (1e-6, 10.0)}


def _number(row: str, key: str, value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        if isinstance(value, bool):  # YAML's true would be 1 sample/s
            raise TypeError
        out = float(value)
    except (TypeError, ValueError):
        raise bad_value(f"{row}.{key}", value, "must be a number") from None
    low, high = _RANGES[key]
    if not (low <= out <= high):  # nan fails both; inf would void the fit
        raise bad_value(f"{row}.{key}", value, f"must be in {bound_text(low)}..{bound_text(high)}")
    return out


_NAME_CHARS = 200  # a row's name is a label of the tables and of `--output`'s comments


def _name(index: int, row: Mapping[str, Any]) -> str:
    """The row's name: printable text on one line. A newline in it would begin a line of its
    own in `calibrate --output`'s YAML (a constant the fit never wrote), an escape would reach
    the terminal."""
    name = str(row.get("name") or f"row{index + 1}")
    if len(name) > _NAME_CHARS or not name.isprintable() or not name.strip():
        raise bad_value(f"row{index + 1}.name", name, "printable text on one line, not blank, "
                        f"at most {_NAME_CHARS} characters")
    return name


def _point(index: int, row: Mapping[str, Any], csv_row: bool = False) -> CalibrationPoint:
    name = _name(index, row)
    result = row.get("result")
    if result in ("", None):
        result = None
    elif result not in _RESULTS:
        raise bad_value(f"{name}.result", result, "allowed: fits, out_of_memory")
    config = {k: v for k, v in row.items() if k not in _MEASURED and k not in _META}
    unknown = next((k for k in config if k not in _CONFIG), None)
    if unknown is not None:  # the config's refusal would list only its own sections
        raise IpuTuneError(
            f"{name}: {key_name(unknown)}: unknown {'column' if csv_row else 'key'}; allowed: "
            f"{', '.join(_MEASURED + _META)}, and the config's {', '.join(_CONFIG)}"
            f"{' (dotted: plan.precision)' if csv_row else ''}"
            f"{did_you_mean(unknown, _MEASURED + _META + _CONFIG)}")
    with row_named(name):
        loaded = load_config(config)
    point = CalibrationPoint(
        name=name,
        config=loaded,
        samples_per_s=_number(name, "samples_per_s", row.get("samples_per_s")),
        device_cycles=_number(name, "device_cycles", row.get("device_cycles")),
        result=result,
        weight=_number(name, "weight", row.get("weight")) or 1.0,
        tolerance=_number(name, "tolerance", row.get("tolerance")),
    )
    if point.samples_per_s is None and point.device_cycles is None and point.result is None:
        raise IpuTuneError(f"{name}: nothing measured; give samples_per_s, device_cycles or result")
    return point


@contextmanager
def row_named(where: str) -> Iterator[None]:
    """An `IpuTuneError` raised inside starts with `where` (the file, then the row's name):
    a config key's error (`plan.io_tiles=33: ...`) alone does not say which row holds it."""
    try:
        yield
    except IpuTuneError as exc:
        raise IpuTuneError(f"{where}: {exc}", exc.fault) from None


def _undot(flat: Mapping[str, str]) -> dict[str, Any]:
    """A CSV row with dotted headers (plan.precision) as a nested mapping; cells parse as YAML
    scalars or flow lists ([layer3.8], [3, 224, 224])."""
    out: dict[str, Any] = {}
    for key, cell in flat.items():
        if key is None or cell is None or str(cell).strip() == "":
            continue
        value = parse_yaml(cell, f"calibration CSV column {key.strip()[:80]!r}")
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _unique_columns(path: Path, names: Sequence[str]) -> None:
    """A column named twice would keep its last cell silently (YAML and JSON refuse a key
    given twice, too)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise IpuTuneError(f"calibration file {str(path)!r}: column {name!r} appears twice; "
                               "allowed: each column once")
        seen.add(name)


def load_points(source: str | Path | Iterable[Mapping[str, Any]]) -> list[CalibrationPoint]:
    """Rows from a YAML file (a list, or a mapping with `points:`), a CSV with dotted column
    names, or an iterable of mappings."""
    rows: list[Mapping[str, Any]]
    csv_file = isinstance(source, str | Path) and Path(source).suffix.lower() == ".csv"
    if isinstance(source, str | Path):
        path = Path(source)
        if csv_file:
            text = read_text(path, "calibration file")
            try:
                reader = csv.DictReader(text.splitlines())
                _unique_columns(path, reader.fieldnames or [])
                rows = [_undot(r) for r in reader]
            except csv.Error as exc:  # e.g. a cell over the csv module's 128 KiB
                raise IpuTuneError(f"calibration file {str(path)!r}: not a readable CSV "
                                   f"({exc}); allowed: a CSV with dotted column names") from None
        else:
            data = read_yaml(path, "calibration file")
            if isinstance(data, Mapping):
                data = data.get("points")
            if not isinstance(data, list):
                raise IpuTuneError(f"{str(path)!r}: expected a list of rows or a `points:` list")
            rows = data
    else:
        rows = list(source)
    points = []
    in_file = isinstance(source, str | Path)
    with row_named(f"calibration file {str(source)!r}") if in_file else nullcontext():
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise IpuTuneError(f"row{i + 1}: expected a mapping, got {type(row).__name__}")
            points.append(_point(i, row, csv_file))
    if not points:  # the file is named: a header alone (or `points: []`) is its fault
        where = f"calibration file {str(source)!r}" if in_file else "calibration"
        raise IpuTuneError(f"{where}: no measured rows; allowed: at least one row of a "
                           "measured run (a CSV needs rows under its header)")
    return points


def default_points() -> list[CalibrationPoint]:
    """The package's measured runs (`points.yaml`)."""
    return load_points(POINTS_FILE)
