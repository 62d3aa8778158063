"""Calibration rows read from a file (`ipu_tune.calibration._points`): a file without a measured
row is refused in one line naming the file and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.calibration import load_points
from ipu_tune.errors import IpuTuneError


@pytest.mark.parametrize(("name", "text"), [
    ("c8.csv", "model.name,workload.micro_batch_size,measured.throughput\n"),
    ("c8.yaml", "points: []\n"),
])
def test_a_file_without_rows_is_named_with_what_is_allowed(
        name: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(IpuTuneError) as info:
        load_points(path)
    assert str(info.value).startswith(f"calibration file {str(path)!r}: no measured rows")
    assert "allowed:" in str(info.value)


@pytest.mark.parametrize(("name", "text", "unit"), [
    ("c.csv", "model.name,samples_per_s,bogus\nmnist_cnn,100,1\n", "column"),
    ("c.yaml", "points:\n- {model: {name: mnist_cnn}, samples_per_s: 100, bogus: 1}\n", "key"),
])
def test_an_unknown_column_lists_the_measured_ones_too(
        name: str, text: str, unit: str, tmp_path: Path) -> None:
    """The config's refusal listed only model, plan, system, workload: not the columns that
    say what was measured, which a misspelt `samples_per_sec` was meant as."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(IpuTuneError) as info:
        load_points(path)
    assert str(info.value) == (
        f"calibration file {str(path)!r}: row1: bogus: unknown {unit}; allowed: samples_per_s, "
        "device_cycles, result, name, source, weight, tolerance, and the config's model, plan, "
        "system, workload, ipu_tune" + (" (dotted: plan.precision)" if unit == "column" else ""))


def test_a_misspelt_measured_column_is_offered(tmp_path: Path) -> None:
    path = tmp_path / "c.csv"
    path.write_text("model.name,samples_per_sec\nmnist_cnn,100\n")
    with pytest.raises(IpuTuneError, match=r"samples_per_sec: unknown column; .*; did you mean "
                                           r"'samples_per_s'\?$"):
        load_points(path)
