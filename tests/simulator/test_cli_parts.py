"""The terminal report of `ipu-tune evaluate` and the `ipu-tune calibrate` command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ipu_tune import evaluate_config
from ipu_tune.cli import calibrate_cmd
from ipu_tune.cli.evaluate_format import format_result
from ipu_tune.config import load_config
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config
from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES, constants_from_mapping, simulate

SEED = {
    "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
    "workload": {"micro_batch_size": 64},
    "system": {"ipu": "mk2", "num_ipus": 2},
    "plan": {"precision": "16.16", "gradient_accumulation": 8,
             "pipeline": {"splits": ["layer3.8"]}, "recompute": "checkpoints"},
}


def test_format_result_shows_memory_time_and_verdict() -> None:
    cfg = load_config(SEED)
    r = evaluate_config(cfg)
    text = format_result(r, cfg)
    for word in (*MEMORY_CATEGORIES, *TIME_PHASES, "IPU0 (stage 0)", "IPU1 (stage 1)",
                 "fits: yes", "samples/s", f"bottleneck: {r.bottleneck}", "max tile"):
        assert word in text, word
    total_line = next(line for line in text.splitlines() if line.startswith("total  "))
    assert f"{r.memory[0].total_bytes / 1e6:.1f}" in total_line
    assert f"{r.throughput:,.0f}" in text


def test_format_result_gives_the_reason_when_it_does_not_fit() -> None:
    cfg = load_config({**SEED, "plan": {**SEED["plan"], "precision": "32.32",
                                        "gradient_accumulation": 3}})
    r = evaluate_config(cfg)
    assert not r.fits
    text = format_result(r, cfg)
    assert f"fits: NO - {r.reason}" in text


def test_calibrate_command_refits_and_writes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "runs.yaml"
    config = {**SEED, "plan": {**SEED["plan"], "device_iterations": 4, "eight_bit_io": True}}
    rows.write_text(yaml.safe_dump([{**config, "name": "mine", "samples_per_s": 3000}]))
    out = tmp_path / "constants.yaml"
    code = calibrate_cmd.main([str(rows), "--fit", "preprocess_s_per_sample",
                               "--max-evals", "60", "--output", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "preprocess_s_per_sample:" in printed and "mine" in printed
    constants = constants_from_mapping(yaml.safe_load(out.read_text()))
    cfg = load_config(config)
    r = simulate(profile_model(cfg.model), make_system("mk2", 2), plan_from_config(cfg),
                 constants=constants)
    assert r.throughput == pytest.approx(3000, rel=0.02)


def test_calibrate_command_reports_bad_input(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {model: {name: resnet101}}\n")
    assert calibrate_cmd.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ipu-tune: error:") and "nothing measured" in err
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump([{**SEED, "samples_per_s": 1000}]))
    assert calibrate_cmd.main([str(good), "--fit", "bogus"]) == 2
    assert "calibrate.fit='bogus'" in capsys.readouterr().err
