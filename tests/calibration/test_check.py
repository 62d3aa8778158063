"""`calibrate --check`: the simulator against measured rows without a refit, per row and per
model and workload mode (median absolute and worst samples/s error)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from ipu_tune.calibration import (
    POINTS_FILE,
    check_table,
    default_points,
    error_summary,
    load_points,
    memory_agreement,
    predict,
)
from ipu_tune.cli.calibrate_cmd import main as calibrate_main


def _rows(*names: str) -> list[dict[str, object]]:
    points = yaml.safe_load(Path(POINTS_FILE).read_text())["points"]
    return [p for p in points if p["name"] in names]


def test_the_summary_is_the_median_of_absolute_errors_and_the_signed_worst() -> None:
    real = predict([p for p in default_points() if p.name.startswith("mlperf_resnet50")])
    assert len(real) == 3
    # The same predictions, with measured rates set so the errors are +10%, -20% and +5%.
    shifted = [dataclasses.replace(p, point=dataclasses.replace(
        p.point, samples_per_s=p.samples_per_s / (1 + e))) for p, e in zip(real, (0.1, -0.2, 0.05),
                                                                          strict=True)]
    table = check_table(shifted)
    assert [round(e, 6) for e in table["error_pct"]] == [10.0, -20.0, 5.0]
    summary = error_summary(table)
    assert list(summary["model"]) == ["resnet50"]  # one group: no "all" row repeating it
    assert summary["rows"].iloc[0] == 3
    assert summary["median_abs_error_pct"].iloc[0] == pytest.approx(10.0)
    assert summary["worst_error_pct"].iloc[0] == pytest.approx(-20.0)


def test_groups_are_per_model_and_mode_with_an_overall_row() -> None:
    table = check_table(predict(default_points()))
    summary = error_summary(table).set_index(["model", "mode"])
    assert summary.loc[("resnet50", "infer"), "rows"] == 1
    assert summary.loc[("resnet50", "train"), "rows"] == 3
    rates = table[table["kind"] == "samples_per_s"]
    assert summary.loc[("all", ""), "rows"] == len(rates)
    memory = table[table["kind"] == "memory"]
    assert len(memory) == 5 and memory["memory_right"].all()
    assert memory_agreement(table) == (15, 15)  # every row once, measured rates included
    assert memory["error_pct"].map(math.isnan).all()


def test_check_prints_each_row_and_the_errors_without_writing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows("mlperf_resnet50_pod16", "resnet50_inference_c600")
    rows[0]["samples_per_s"] = 2 * rows[0]["samples_per_s"]  # type: ignore[operator]
    runs = tmp_path / "held_out.yaml"
    runs.write_text(yaml.safe_dump(rows))
    assert calibrate_main([str(runs), "--check"]) == 0
    out = capsys.readouterr().out
    # The errors of the simulator as shipped, twice the measured rate on the first row.
    pod16, c600 = (p.errors()["samples_per_s"] for p in predict(load_points(runs)))
    assert pod16 < -0.45 and abs(c600) < 0.05
    assert "mlperf_resnet50_pod16" in out and "58,812 samples/s" in out
    assert f"{pod16:+.1%}" in out and f"{c600:+.1%}" in out
    lines = {tuple(line.split()[:2]): line.split() for line in out.splitlines() if line}
    assert lines[("resnet50", "infer")][2:] == ["1", f"{abs(c600):.1%}", f"{c600:+.1%}"]
    median = (abs(pod16) + abs(c600)) / 2
    assert lines[("all", "2")][1:] == ["2", f"{median:.1%}", f"{pod16:+.1%}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["held_out.yaml"]


def test_check_with_constants_uses_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump(_rows("seed_fp16_ga8")))
    assert calibrate_main([str(runs), "--check"]) == 0
    shipped = capsys.readouterr().out
    constants = tmp_path / "constants.yaml"
    constants.write_text("call_overhead_s: 0.2\n")  # 0.2 s per call, 8x the fit: the rate falls
    assert calibrate_main([str(runs), "--check", "--constants", str(constants)]) == 0
    refit = capsys.readouterr().out
    assert "shipped constants" in shipped and f"constants of {constants}" in refit
    assert "-1.3%" in shipped and "-1.3%" not in refit


def test_a_measured_run_predicted_out_of_memory_is_shown_and_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = _rows("bert_base_sl512_fits")[0]
    del row["result"]
    row["workload"] = {**row["workload"], "micro_batch_size": 64}  # type: ignore[dict-item]
    row["samples_per_s"] = 3000  # as if it had run: the simulator says it cannot
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump([row]))
    assert calibrate_main([str(runs), "--check"]) == 0
    out = capsys.readouterr().out
    # The simulator says it does not run: 0 samples/s, -100 %, in the median too.
    assert "out of memory (its step alone: " in out and "-100.0%" in out
    assert "memory: 0 of 1 row predicted as measured" in out
    assert calibrate_main([str(runs), "--check", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["samples_per_s_error_by_model_and_mode"][0]["median_abs_error_pct"] == 100.0


def test_check_json_gives_the_same_figures_as_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rows = _rows("mlperf_resnet50_pod16", "seed_fp16_ga8")
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump(rows))
    assert calibrate_main([str(runs), "--check", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    table = check_table(predict(load_points(runs)))
    assert [r["error_pct"] for r in data["rows"]] == pytest.approx(list(table["error_pct"]))
    rate = next(r for r in data["rows"] if r["row"] == "mlperf_resnet50_pod16")
    assert rate["measured_value"] == 29406 and rate["kind"] == "samples_per_s"
    assert rate["predicted_value"] == pytest.approx(rate["measured_value"]
                                                    * (1 + rate["error_pct"] / 100))
    cycles = next(r for r in data["rows"] if r["kind"] == "device_cycles")
    seed = next(r for r in rows if r["name"] == "seed_fp16_ga8")
    assert cycles["measured_value"] == seed["device_cycles"]
    assert data["memory"] == {"predicted_as_measured": 2, "rows": 2}
    assert {g["model"] for g in data["samples_per_s_error_by_model_and_mode"]} == {
        "resnet50", "resnet101", "all"}


def test_a_small_cycle_count_is_printed_whole_not_as_zero_millions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {name: r, model: {name: mnist_cnn}, system: {num_ipus: 1}, "
                    "device_cycles: 2500}\n")
    assert calibrate_main([str(runs), "--check"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("r "))
    assert "2,500 cycles" in row and "0.0 M" not in row
