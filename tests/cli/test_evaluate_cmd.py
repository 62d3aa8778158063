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


def test_an_inference_plan_states_its_latency(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = {"model": {"name": "resnet50", "dataset": {"name": "synthetic"}},
              "system": {"ipu": "mk2", "num_ipus": 2}, "workload": {"mode": "infer",
                                                                   "micro_batch_size": 4},
              "plan": {"device_iterations": 10, "replication_factor": 2}}
    cfg = tmp_path / "plan.yaml"
    cfg.write_text(yaml.safe_dump(config))
    out = _run(["evaluate", str(cfg)], capsys)
    ms = ipu_tune.evaluate(config).latency_s * 1e3
    assert f"latency: {ms:,.3f} ms per call of 40 samples on each replica" in out
    train = _run(["evaluate", str(tmp_path / "plan.yaml"), "workload.mode=train",
                  "plan.device_iterations=1"], capsys)
    assert "latency:" not in train
    one = _run(["evaluate", str(cfg), "plan.device_iterations=1", "workload.micro_batch_size=1",
                "plan.replication_factor=1", "system.num_ipus=1"], capsys)
    assert " ms per call of 1 sample (the call: data made on the IPU" in one


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


def test_a_refused_override_is_echoed_as_typed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OmegaConf shows 1e3 as '1000.0', a string to a reader, as the tuner once did too."""
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: resnet50\n")
    with pytest.raises(SystemExit) as done:
        main(["evaluate", str(cfg), "workload.micro_batch_size=1e3"])
    assert done.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "ipu-tune: error: workload.micro_batch_size=1e3: allowed: an integer")


@pytest.mark.parametrize("argv", [[], ["plan.eight_bit_io=yes"]])
def test_a_switch_given_yes_is_refused_in_the_file_as_on_the_command_line(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file ran with both switches on, the command line refused `yes`."""
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: {name: mnist_cnn}\n"
                   + ("plan: {eight_bit_io: yes, offload_optimizer_state: on}\n" if not argv
                      else ""))
    with pytest.raises(SystemExit) as done:
        main(["evaluate", str(cfg), *argv])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "plan.eight_bit_io='yes'" in err, err


@pytest.mark.parametrize("overrides", [
    ["system=bow", "system.num_ipus=4", "plan.replication_factor=4"],
    ["system.num_ipus=4", "system=bow", "plan.replication_factor=4"],  # any order, as Hydra
])
def test_a_preset_chosen_keeps_the_keys_set_over_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str]
) -> None:
    # A preset named on the command line was a string that a later `system.KEY=` replaced
    # with a mapping of that key alone: the schema's Mk2 came back, silently.
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: {name: resnet50, dataset: {name: synthetic}}\n"
                   "system: {ipu: mk2, num_ipus: 1}\nworkload: {mode: infer}\n")
    out = json.loads(_run(["evaluate", str(cfg), "--json", *overrides], capsys))
    want = ipu_tune.evaluate({"model": {"name": "resnet50", "dataset": {"name": "synthetic"}},
                              "system": {"ipu": "bow", "num_ipus": 4},
                              "workload": {"mode": "infer"},
                              "plan": {"replication_factor": 4}})
    assert out == json.loads(json.dumps(want.to_dict()))


@pytest.mark.parametrize("overrides", [["model=vit_b_16", "model.dataset.name=synthetic"],
                                       ["model.dataset.name=synthetic", "model=vit_b_16"]])
def test_a_model_chosen_keeps_the_keys_set_over_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: list[str]
) -> None:
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: resnet50\nsystem: {ipu: mk2, num_ipus: 1}\nworkload: {mode: infer}\n")
    out = json.loads(_run(["evaluate", str(cfg), "--json", *overrides], capsys))
    want = ipu_tune.evaluate({"model": {"name": "vit_b_16", "dataset": {"name": "synthetic"}},
                              "system": {"ipu": "mk2", "num_ipus": 1},
                              "workload": {"mode": "infer"}})
    assert out == json.loads(json.dumps(want.to_dict()))


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
