from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import ipu_tune
from ipu_tune.__main__ import main
from ipu_tune.simulator import DEFAULT_CONSTANTS

PLAN = {
    "system": {"ipu": "mk2", "num_ipus": 2},
    "plan": {"precision": "16.16", "gradient_accumulation": 8, "device_iterations": 4,
             "recompute": "checkpoints", "pipeline": {"splits": ["layer3.8"]},
             "eight_bit_io": True, "async_dataloader": True, "dataloader_workers": 8},
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_json_matches_the_python_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump(PLAN))
    out = json.loads(_run(["evaluate", str(cfg), "--json"], capsys))
    assert out == json.loads(json.dumps(ipu_tune.evaluate(PLAN).to_dict()))
    assert out["fits"] is True and len(out["memory_per_ipu"]) == 2


def test_refitted_constants_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump(PLAN))
    slow = tmp_path / "constants.yaml"
    slow.write_text(yaml.safe_dump({"matmul_efficiency": DEFAULT_CONSTANTS.matmul_efficiency / 4}))
    base = json.loads(_run(["evaluate", str(cfg), "--json"], capsys))
    refit = json.loads(_run(["evaluate", str(cfg), "--json", "--constants", str(slow)], capsys))
    assert refit["device_throughput"] < base["device_throughput"]
    api = ipu_tune.evaluate(PLAN, constants={"matmul_efficiency":
                                             DEFAULT_CONSTANTS.matmul_efficiency / 4})
    assert api.device_throughput == pytest.approx(refit["device_throughput"])


def test_readable_breakdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump(PLAN))
    out = _run(["evaluate", str(cfg)], capsys).lower()
    for word in ("weights", "optimizer_state", "compute", "bottleneck", "samples/s"):
        assert word in out, word


def test_overrides_complete_a_file_before_it_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `system: pod16` alone needs 16 replicas; the overrides give them (and resize the POD,
    # whose servers follow: one per 16 IPUs).
    cfg = tmp_path / "pod.yaml"
    cfg.write_text("model: resnet50\nsystem: pod16\n")
    out = json.loads(_run(["evaluate", str(cfg), "--json", "system.num_ipus=64",
                           "plan.replication_factor=64"], capsys))
    want = ipu_tune.evaluate({"model": "resnet50", "system": "pod64",
                              "plan": {"replication_factor": 64}})
    assert out == json.loads(json.dumps(want.to_dict()))
    with pytest.raises(SystemExit) as done:  # the completed config is still checked
        main(["evaluate", str(cfg), "plan.replication_factor=4"])
    assert done.value.code == 2
    assert "system.num_ipus=16: must equal" in capsys.readouterr().err


def test_the_ipu_config_named_is_applied_and_overrides_win(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan.from_ipu_config` in the file or on the line: its plan is evaluated, as the tuner
    starts from it (keys given on the line keep their values)."""
    (tmp_path / "ipu_config.json").write_text('{"replication_factor": 2, "matmul_proportion": 0.3}')
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump({"model": {"name": "mnist_cnn"}, "system": {"num_ipus": 2},
                                   "plan": {"from_ipu_config": str(tmp_path)}}))
    plan = _run(["evaluate", str(cfg)], capsys).splitlines()[1]
    assert "AMP 0.3," in plan and "replicas 2," in plan and "precision 16.16" in plan
    plan = _run(["evaluate", str(cfg), "plan.available_memory_proportion=0.5"],
                capsys).splitlines()[1]
    assert "AMP 0.5," in plan and "replicas 2," in plan
