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
