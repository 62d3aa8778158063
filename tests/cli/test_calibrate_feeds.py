"""`calibrate` refuses fewer rows than constants, and its output feeds `evaluate` and the
tuner as `simulator.constants=FILE`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ipu_tune.calibration import POINTS_FILE
from ipu_tune.cli.calibrate_cmd import main as calibrate_main
from ipu_tune.cli.evaluate_cmd import main as evaluate_main


def _one_measured_row(tmp_path: Path) -> Path:
    points = yaml.safe_load(Path(POINTS_FILE).read_text())["points"]
    row = next(p for p in points if p.get("samples_per_s") and p["model"]["name"] == "resnet101")
    path = tmp_path / "my_runs.yaml"
    path.write_text(yaml.safe_dump([row]))
    return path


def test_calibrate_refuses_fewer_rows_than_constants_naming_how_many(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = _one_measured_row(tmp_path)
    assert calibrate_main([str(runs)]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "1 measured row for 7 constants" in err
    assert "at least 7 rows" in err


def test_calibrate_output_feeds_evaluate_and_the_tuner(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import ipu_tune.cli.run as cli_run

    runs = _one_measured_row(tmp_path)
    out = tmp_path / "constants.yaml"
    # One row is enough for one constant.
    assert calibrate_main([str(runs), "--fit", "call_overhead_s", "--output", str(out),
                           "--max-evals", "60"]) == 0
    capsys.readouterr()
    fitted = yaml.safe_load(out.read_text())
    assert set(fitted) == {"call_overhead_s"}
    out.write_text(out.read_text().replace(  # the fit, made large enough to change the answer
        f"call_overhead_s: {fitted['call_overhead_s']:.6g}", "call_overhead_s: 0.2"))

    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"system": {"num_ipus": 1}, "workload": {"micro_batch_size": 8},
                                    "plan": {"precision": "16.16"}}))
    assert evaluate_main([str(plan), "--json"]) == 0
    default = yaml.safe_load(capsys.readouterr().out)
    assert evaluate_main([str(plan), f"simulator.constants={out}", "--json"]) == 0
    calibrated = yaml.safe_load(capsys.readouterr().out)
    assert calibrated["throughput"] < default["throughput"]  # 0.2 s per call is felt

    monkeypatch.chdir(tmp_path)
    assert cli_run.hydra_main(["system.num_ipus=1", f"simulator.constants={out}",
                               "study.n_trials=3", "study.progress_bar=false"]) == 0
    text = capsys.readouterr().out
    assert "best: trial" in text


def test_a_constants_file_with_an_unknown_key_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("constants: 1\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({"system": {"num_ipus": 1}}))
    assert evaluate_main([str(plan), f"simulator.constants={bad}"]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "simulator.constants=" in err and "unknown constant" in err


def test_best_yaml_of_a_calibrated_study_evaluates_with_its_constants(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """best.yaml holds no simulator section: the command it prints to evaluate it again names
    the study's constants file, and gives the figures the study scored; `compare` takes it."""
    import shlex

    import ipu_tune.cli.run as cli_run
    from ipu_tune.cli.compare_cmd import main as compare_main

    constants = tmp_path / "constants.yaml"
    constants.write_text("call_overhead_s: 0.2\n")  # large enough to be felt
    monkeypatch.chdir(tmp_path)
    assert cli_run.hydra_main(["system.num_ipus=1", f"simulator.constants={constants}",
                               "study.name=c", "study.n_trials=3",
                               "study.progress_bar=false"]) == 0
    capsys.readouterr()
    best = tmp_path / "results" / "c" / "best.yaml"
    line = next(ln for ln in best.read_text().splitlines() if "Evaluate it again with:" in ln)
    argv = shlex.split(line.split("with: ", 1)[1])[4:]  # after `python -m ipu_tune evaluate`
    assert argv[1:] == ["--constants", str(constants)]
    assert evaluate_main([*argv, "--json"]) == 0
    scored = yaml.safe_load(best.read_text())["ipu_tune"]["objectives"]["throughput"]
    assert yaml.safe_load(capsys.readouterr().out)["throughput"] == pytest.approx(scored)
    assert compare_main([str(best), str(best), "--constants", str(constants), "--json"]) == 0
    capsys.readouterr()
    assert evaluate_main([str(best), "--json"]) == 0  # the defaults: another figure
    assert yaml.safe_load(capsys.readouterr().out)["throughput"] != pytest.approx(scored)
