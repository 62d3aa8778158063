"""The PopTorch program of a Transformers model: which module to build, integer token ids, and
the loss its family trains with."""

from __future__ import annotations

import ast

import pytest

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig, PipelineConfig, PlanConfig
from ipu_tune.models import profile_model

from ._render import poptorch_snippet


def _program(hf: HfConfig, splits: list[str]) -> str:
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=64),
                     plan=PlanConfig(precision="16.16", gradient_accumulation=8,
                                     pipeline=PipelineConfig(splits=splits)))  # fmt: skip
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    ast.parse(source)
    return " ".join(source.split())  # the exporter formats long calls over several lines


def test_causal_lm_program_builds_the_config_with_int_ids_and_shifted_labels() -> None:
    source = _program(HfConfig(model_type="gpt2", config={"n_layer": 2}), ["transformer.h.1"])
    assert "from transformers import AutoConfig, AutoModelForCausalLM" in source
    assert 'AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", n_layer=2))' in source
    assert "INPUT_DTYPE = torch.int32" in source
    assert "out[:, :-1].reshape(-1, out.shape[-1]), labels[:, 1:].reshape(-1)" in source
    assert "model.transformer.h[1] = poptorch.BeginBlock(model.transformer.h[1], ipu_id=1)" \
        in source
    assert "resnet101" not in source


@pytest.mark.parametrize(("hf", "split", "loss"), [
    (HfConfig(model_type="bert", config={"num_hidden_layers": 2}), "bert.encoder.layer.1",
     "self.criterion(out.reshape(-1, out.shape[-1]), labels.reshape(-1))"),
    (HfConfig(model_type="bert", task="sequence-classification",
              config={"num_hidden_layers": 2}), "bert.encoder.layer.1",
     "self.criterion(out, labels)"),
])
def test_encoder_programs_use_the_familys_loss(hf: HfConfig, split: str, loss: str) -> None:
    source = _program(hf, [split])
    assert loss in source and "self.model(x).logits" in source
    assert "INPUT_DTYPE = torch.int32" in source
