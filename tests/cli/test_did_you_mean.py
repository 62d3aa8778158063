"""A name a key refuses that is near one it takes (another case, `_` for `-`, a typo) is
answered with that name, by one helper (`ipu_tune.errors.did_you_mean`) for every key of
names: a Transformers model type and task, a zoo model, a config group's option, a system
preset, a sampler, an objective, a text knob, a dataset, an IPU, a Hydra flag's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.errors import bad_value, did_you_mean
from tests.cli._one_line import exit_line


@pytest.mark.parametrize(("value", "meant"), [
    ("deberta_v2", "deberta-v2"), ("DeBERTa-V2", "deberta-v2"), ("debertav2", "deberta-v2"),
    ("Llama", "llama"), ("lama", "llama"), ("gpt-neox", "gpt_neox"),
])
def test_a_near_transformers_model_type_is_named(value: str, meant: str) -> None:
    from transformers import CONFIG_MAPPING

    assert did_you_mean(value, CONFIG_MAPPING.keys()) == f"; did you mean {meant!r}?"


@pytest.mark.parametrize("value", ["xyz", "mk3", "", None, 5, "mk2"])
def test_nothing_is_offered_when_nothing_is_near(value: object) -> None:
    """`mk3` is as near `mk1` as `mk2`: a guess, not offered; an allowed name needs none."""
    assert did_you_mean(value, ["mk1", "mk2", "bow", "c600"]) == ""


def test_bad_value_ends_with_the_suggestion() -> None:
    assert str(bad_value("sampler.name", "randm", "allowed: tpe, random", ["tpe", "random"])) == (
        "sampler.name='randm': allowed: tpe, random; did you mean 'random'?")


@pytest.mark.parametrize(("argv", "meant"), [
    (["model=hf", "model.hf.model_type=deberta_v2"], "deberta-v2"),
    (["model=hf", "model.hf.model_type=DeBERTa-V2"], "deberta-v2"),
    (["model=hf", "model.hf.model_type=Llama"], "llama"),
    (["model=hf", "model.hf.model_type=gpt2", "model.hf.task=causal_lm"], "causal-lm"),
    (["model=resnet5"], "resnet50"),
    (["model.name=resnet5"], "resnet50"),
    (["system=bow_pod61"], "bow_pod64"),
    (["sampler=randm"], "random"),
    (["sampler.name=Random"], "random"),
    (["search=throughtput"], "throughput"),
    (["search.objectives=[thruput]"], "throughput"),
    (["plan.recompute=every-block"], "every_block"),
    (["workload.optimizer=Adam"], "adam"),
    (["model.dataset.name=cifar"], "cifar10"),
    (["system.ipu=MK2"], "mk2"),
    (["--info", "defualts"], "defaults"),
    (["profile", "resnet5"], "resnet50"),
    (["profile", "hf", "model.hf.model_type=deberta_v2"], "deberta-v2"),
])
def test_a_near_name_is_offered_on_the_command_line(
        argv: list[str], meant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = exit_line(argv, capsys)
    assert code == 2, err
    assert err.startswith("ipu-tune: error: ") and err.endswith(f"; did you mean {meant!r}?"), err


def test_a_near_system_preset_is_offered_by_evaluate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: {name: mnist_cnn}\n")
    code, err = exit_line(["evaluate", str(plan), "system=pod61"], capsys)
    assert code == 2 and err.endswith("; did you mean 'pod64'?"), err
