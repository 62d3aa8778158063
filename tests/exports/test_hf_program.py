"""The PopTorch program of a Transformers model: which module to build, integer token ids, and
the loss its family trains with."""

from __future__ import annotations

import ast

import pytest
import torch
import torch.nn.functional as F

from ipu_tune.config import (
    EvalConfig,
    HfConfig,
    ModelConfig,
    PipelineConfig,
    PlanConfig,
    WorkloadConfig,
)
from ipu_tune.models import profile_model

from ._recorder import poptorch_model
from ._render import poptorch_snippet


def _source(hf: HfConfig, splits: list[str], precision: str = "16.16") -> str:
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=64),
                     plan=PlanConfig(precision=precision, gradient_accumulation=8,
                                     pipeline=PipelineConfig(splits=splits)))  # fmt: skip
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    ast.parse(source)
    return source


def _program(hf: HfConfig, splits: list[str]) -> str:
    # One line: the exporter formats long calls over several lines.
    return " ".join(_source(hf, splits).split())


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


def test_question_answering_program_trains_on_the_answer_span() -> None:
    source = _program(HfConfig(model_type="bert", task="question-answering",
                               config={"num_hidden_layers": 2}), ["bert.encoder.layer.1"])
    assert "from transformers import AutoConfig, AutoModelForQuestionAnswering" in source
    assert "out = self.model(x) if labels is None: return out" in source
    assert "start, end = labels[:, 0], labels[:, 1]" in source
    assert ("self.criterion(out.start_logits, start) + self.criterion(out.end_logits, end)"
            in source)
    assert "INPUT_DTYPE = torch.int32" in source


def test_question_answering_loss_runs_on_a_real_transformers_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The program's ModelWithLoss on Transformers' own BertForQuestionAnswering (a tiny one,
    on the CPU; poptorch recorded): a finite loss with gradients, and logits without labels."""
    tiny = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
            "intermediate_size": 64, "vocab_size": 100}  # fmt: skip
    source = _source(HfConfig(model_type="bert", task="question-answering", config=tiny),
                     ["bert.encoder.layer.1"], precision="32.32")  # fmt: skip
    model = poptorch_model(monkeypatch, source)
    ids = torch.randint(100, (4, 64))
    spans = torch.tensor([[3, 5], [0, 0], [10, 12], [63, 63]])
    out, loss = model(ids, spans)
    assert out.start_logits.shape == (4, 64) and torch.isfinite(loss)
    loss.backward()
    assert model.model.qa_outputs.weight.grad is not None
    assert model(ids).end_logits.shape == (4, 64)


@pytest.mark.parametrize(("model_type", "built_by"), [
    ("clip_text_model", "AutoModel.from_config(AutoConfig.for_model("),
    # A tower AutoModel does not build: its own class, given the config.
    ("siglip_text_model", "SiglipTextModel(AutoConfig.for_model("),
])
def test_a_tower_program_trains_its_features_under_a_marked_stand_in_loss(
    monkeypatch: pytest.MonkeyPatch, model_type: str, built_by: str,
) -> None:
    """A base model without a head (a text tower, a tiny one on the CPU): the program builds
    it, trains a finite stand-in loss on `last_hidden_state` and says where the user's
    objective goes; no optimum-graphcore file, which runs registered heads only."""
    from ipu_tune.exports import EXPORTERS, export_context

    tiny = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
            "intermediate_size": 64, "vocab_size": 100}  # fmt: skip
    hf = HfConfig(model_type=model_type, config=tiny)
    source = _source(hf, ["encoder.layers.1"], precision="32.32")
    assert built_by in "".join(source.split()) and "your objective" in source
    model = poptorch_model(monkeypatch, source)
    ids = torch.randint(100, (4, 64))
    out, loss = model(ids, ids)
    assert out.shape == (4, 64, 32) and torch.isfinite(loss)
    loss.backward()
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=64))
    ctx = export_context(cfg, None, profile_model(cfg.model))
    written = {e.file_name for e in EXPORTERS if e.applies(ctx)}
    assert "poptorch_options.py" in written
    assert not written & {"ipu_config.json", "run_with_optimum.py"}


@pytest.mark.parametrize("eight_bit", [False, True])
def test_an_image_text_program_trains_on_images_with_their_captions(
    monkeypatch: pytest.MonkeyPatch, eight_bit: bool,
) -> None:
    """CLIP's two towers (tiny, on the CPU): the program takes pixels and caption ids as the
    data loader yields them, and trains CLIP's symmetric contrastive loss; 8-bit pixels
    are normalised on the IPU with the captions passed through."""
    tower = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
             "intermediate_size": 64}
    hf = HfConfig(model_type="clip", task="feature-extraction", config={
        "text_config": {**tower, "vocab_size": 100, "max_position_embeddings": 16},
        "vision_config": {**tower, "image_size": 32, "patch_size": 16}, "projection_dim": 16})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf),
                     plan=PlanConfig(precision="32.32", gradient_accumulation=8,
                                     eight_bit_io=eight_bit,
                                     pipeline=PipelineConfig(splits=["vision_model.encoder.layers.1"])))
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    flat = " ".join(source.replace("\n#", " ").split())  # comment lines wrap
    assert "each with its caption's 16 token ids (torch.int32)" in flat
    model = poptorch_model(monkeypatch, source)
    pixels = (torch.randint(256, (4, 3, 32, 32), dtype=torch.uint8) if eight_bit
              else torch.randn(4, 3, 32, 32))
    ids = torch.randint(100, (4, 16))
    out, loss = model(pixels, ids)
    assert out.shape == (4, 4) and torch.isfinite(loss)
    pairs = torch.arange(4)  # the mean of the image side and the text side
    sides = (F.cross_entropy(out, pairs) + F.cross_entropy(out.t(), pairs)) / 2
    assert torch.allclose(loss, sides)
    loss.backward()


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_a_zoo_bert_runs_its_head_on_the_masked_positions_only(
    monkeypatch: pytest.MonkeyPatch, mode: str,
) -> None:
    """The head ran on the masked positions in the simulation (Graphcore's BERT): the program's
    model, a real BertForMaskedLM on the CPU, gives scores for those positions only, trains on
    their labels, and keeps the head's placement on IPU0."""
    kwargs = {"num_layers": 2, "hidden": 32, "num_heads": 2, "intermediate": 64,
              "vocab_size": 100, "masked_positions": 6}  # fmt: skip
    cfg = EvalConfig(model=ModelConfig(name="bert_base", sequence_length=64, kwargs=kwargs),
                     plan=PlanConfig(precision="32.32", gradient_accumulation=8,
                                     device_iterations=8,
                                     pipeline=PipelineConfig(splits=["encoder.layer.1"])),
                     workload=WorkloadConfig(mode=mode))  # fmt: skip
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    assert "MASKED_POSITIONS = 6" in source
    assert "model.cls = poptorch.BeginBlock(model.cls, ipu_id=0)" in source
    model = poptorch_model(monkeypatch, source)
    ids = torch.randint(100, (4, 64))
    if mode == "infer":
        assert model(ids).shape == (4, 6, 100)
        return
    out, loss = model(ids, torch.randint(100, (4, 64)))
    assert out.shape == (4, 6, 100) and torch.isfinite(loss)
    loss.backward()
    assert model.model.model.cls.predictions.transform.dense.weight.grad is not None


def test_a_classifier_is_built_with_the_labels_and_padding_token_it_was_profiled_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GPT-2 has no padding token: the profile set one (and the head's labels); the program
    did not, so its model refused any batch of more than one sequence."""
    tiny = {"n_layer": 2, "n_embd": 32, "n_head": 2}  # GPT-2's vocabulary: its EOS token pads
    hf = HfConfig(model_type="gpt2", task="sequence-classification", config=tiny)
    source = _source(hf, ["transformer.h.1"], precision="32.32")
    classes = 2  # model.num_classes unset: Transformers' default num_labels
    assert "pad_token_id=50256" in source and f"num_labels={classes}" in source
    model = poptorch_model(monkeypatch, source)
    logits = model(torch.randint(100, (2, 64)))  # two sequences: padding token needed
    assert logits.shape == (2, classes)
