"""The fit the documentation states is the one the package ships: the simulator version, the
fitted constants quoted by name, and each calibration row's error in the table of
docs/simulator-phases.md, as `calibrate --check` computes them now."""

from __future__ import annotations

import re
from pathlib import Path

from ipu_tune.calibration import default_points, predict
from ipu_tune.simulator import DEFAULT_CONSTANTS, SIMULATOR_VERSION

DOCS = Path(__file__).resolve().parents[2] / "docs"
PHASES = (DOCS / "simulator-phases.md").read_text()
# Table rows of one measured rate, by the calibration point they show.
RATE_ROWS = {
    "MNIST pipelining tutorial": "mnist_pipeline",
    "MLPerf ResNet-50 POD16": "mlperf_resnet50_pod16",
    "MLPerf ResNet-50 POD64": "mlperf_resnet50_pod64",
    "MLPerf ResNet-50 Bow POD16": "mlperf_resnet50_bow_pod16",
    "BERT-Large SL128 Bow POD16": "bert_large_sl128_bow_pod16",
    "ResNet-50 inference, C600, batch 32": "resnet50_inference_c600",
}


def _signed(value: float) -> str:
    """A relative error as the tables print it: one decimal, a typographic minus."""
    return f"{value:+.1%}".replace("-", "−")


def test_the_documented_version_and_constants_are_the_shipped_ones() -> None:
    c = DEFAULT_CONSTANTS
    simulator = (DOCS / "simulator.md").read_text()
    assert f"This page describes simulator {SIMULATOR_VERSION} " in simulator
    assert f"E ({c.matmul_efficiency:.2f}) and o_half ({c.matmul_half_outputs_per_tile:.0f})" \
        in simulator
    assert f"E AMP efficiency (fitted {c.matmul_efficiency:.2f})" in PHASES
    assert f"(fitted {c.matmul_half_outputs_per_tile:.0f}\noutputs per tile)" in PHASES
    assert f"per-compute-set cycles (fitted\n{c.compute_set_overhead_cycles:,.0f})" in PHASES


def test_the_calibration_table_shows_the_shipped_errors() -> None:
    predictions = {p.point.name: p for p in predict(default_points())}
    rows = {cells[0]: cells[-1] for line in PHASES.splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}
    for label, point in RATE_ROWS.items():
        assert rows[label] == _signed(predictions[point].errors()["samples_per_s"]), label
    for label, kind in (("seed ladder rates (4)", "samples_per_s"),
                        ("seed traces (4)", "device_cycles")):
        errors = [p.errors()[kind] for name, p in predictions.items()
                  if name.startswith("seed_") and kind in p.errors()]
        assert len(errors) == 4
        assert rows[label] == f"{_signed(min(errors))[:-1]}…{_signed(max(errors))}", label
    fits = re.findall(r"\| BERT-Base SL512 \(must fit\) \|.*fits \((\d\.\d+)\) \|$", PHASES,
                      re.MULTILINE)
    assert fits == [f"{predictions['bert_base_sl512_fits'].memory_ratio:.3f}"]
