"""A Transformers model that gets no optimum-graphcore files is said so before its trials,
with the head it was built with and the heads optimum-graphcore runs for its type: a Hub
config saved from a base model (`"architectures": ["BartModel"]`) was tuned as feature
extraction, on a stand-in loss, with no word."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ipu_tune.cli.run import _start
from ipu_tune.config import EvalConfig, HfConfig, ModelConfig


def _bart(tmp_path: Path, architectures: list[str]) -> ModelConfig:
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "bart", "architectures": architectures, "encoder_layers": 1,
        "decoder_layers": 1, "d_model": 32, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}))
    return ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))


def _said(model: ModelConfig, capsys: pytest.CaptureFixture[str]) -> str:
    _start(SimpleNamespace(cfg=EvalConfig(model=model)))  # type: ignore[arg-type]
    return capsys.readouterr().out


def test_a_base_model_is_named_with_the_heads_optimum_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = _said(_bart(tmp_path, ["BartModel"]), capsys)
    assert said.startswith("model: bart as feature-extraction (a base model: it trains on a "
                           "stand-in loss of its output); no ipu_config.json"), said
    assert said.rstrip().endswith("it pipelines bart as seq2seq-lm, sequence-classification: "
                                  "model.hf.task=seq2seq-lm for that head")


def test_nothing_is_said_of_a_model_optimum_runs_or_of_the_zoos_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _said(_bart(tmp_path, ["BartForConditionalGeneration"]), capsys) == ""
    assert _said(ModelConfig(name="resnet18"), capsys) == ""
