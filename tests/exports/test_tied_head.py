"""A tied output head runs, in every export, on the IPU the simulation charged it to.

The simulator runs a head whose weight is the input embeddings' (BERT's MLM `cls`, GPT-2's
`lm_head`) on IPU0 beside them (`StageTime.also`). Called after the last layer, the head would
belong to the last block in PopTorch, so each program names its IPU; a model without such a
head gets no such line.
"""

from __future__ import annotations

import ast

import ipu_tune
from ipu_tune.config import (
    EvalConfig,
    HfConfig,
    ModelConfig,
    PipelineConfig,
    PlanConfig,
    SystemConfig,
)
from ipu_tune.models import profile_model

from ._render import render

GPT2 = HfConfig(model_type="gpt2", config={"n_layer": 4})


def _cfg(model: ModelConfig, splits: list[str]) -> EvalConfig:
    stages = len(splits) + 1
    return EvalConfig(model=model, plan=PlanConfig(gradient_accumulation=8,
                                                   pipeline=PipelineConfig(splits=splits)),
                      system=SystemConfig(num_ipus=stages))  # fmt: skip


def _exports(cfg: EvalConfig) -> dict[str, str]:
    profile = profile_model(cfg.model)
    return {name: render(name, cfg, None, profile) for name in ("poptorch", "popart", "tensorflow")}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_gpt2s_lm_head_is_placed_on_the_ipu_the_simulation_ran_it_on() -> None:
    cfg = _cfg(ModelConfig(name="hf", hf=GPT2, sequence_length=64),
               ["transformer.h.1", "transformer.h.2", "transformer.h.3"])
    stages = ipu_tune.evaluate(cfg).stages
    assert [t.also for t in stages] == [("lm_head",), (), (), ()]  # the simulator's charge
    files = _exports(cfg)
    torch_code = files["poptorch"]
    assert "model.lm_head = poptorch.BeginBlock(model.lm_head, ipu_id=0)" in torch_code
    assert "model.transformer.wte = poptorch.BeginBlock(model.transformer.wte, ipu_id=0)" \
        in torch_code
    # Its block follows the last stage's: a stage of its own, as optimum-graphcore runs it.
    assert "poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)" in torch_code
    popart = ast.parse(files["popart"])
    heads = [n for n in popart.body if isinstance(n, ast.Assign)
             and getattr(n.targets[0], "id", "") == "HEAD_IPU"]  # fmt: skip
    assert [ast.literal_eval(n.value) for n in heads] == [{"lm_head": 0}]
    assert "builder.pipelineStage(4)" in _flat(files["popart"])
    assert "device_mapping=[0, 1, 2, 3, 0]" in _flat(files["tensorflow"])


def test_zoo_berts_mlm_head_is_placed_on_ipu0_in_every_export() -> None:
    cfg = _cfg(ModelConfig(name="bert_base", sequence_length=128, num_classes=30522),
               ["encoder.layer.6"])
    assert ipu_tune.evaluate(cfg).stages[0].also == ("cls",)
    files = _exports(cfg)
    assert "model.cls = poptorch.BeginBlock(model.cls, ipu_id=0)" in files["poptorch"]
    assert 'HEAD_IPU = {"cls": 0}' in files["popart"]
    assert "device_mapping=[0, 1, 0]" in _flat(files["tensorflow"])


def test_a_head_that_is_its_own_last_stage_or_untied_gets_no_placement() -> None:
    """A split at BERT's head gives it a stage of its own (the simulator charges it there);
    a SQuAD span head and a classifier are not tied: both run after the last layer."""
    bert = ModelConfig(name="bert_base", sequence_length=128, num_classes=30522)
    squad = ModelConfig(name="hf", sequence_length=64, hf=HfConfig(
        model_type="bert", task="question-answering", config={"num_hidden_layers": 2}))
    resnet = ModelConfig(name="resnet18", input_shape=[3, 32, 32], num_classes=10)
    for cfg in (_cfg(bert, ["encoder.layer.4", "encoder.layer.8", "cls"]),
                _cfg(squad, ["bert.encoder.layer.1"]), _cfg(resnet, ["layer3.0"])):
        assert all(t.also == () for t in ipu_tune.evaluate(cfg).stages[:-1])
        files = _exports(cfg)
        assert "AutoIncrement" not in files["poptorch"]
        assert "output head" not in files["poptorch"] + files["popart"] + files["tensorflow"]
        assert "HEAD_IPU" not in files["popart"]
        n = len(cfg.plan.pipeline.splits) + 1
        assert f"device_mapping={list(range(n))}" in _flat(files["tensorflow"])
