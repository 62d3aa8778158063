"""Transformers models by configuration: built on the meta device, blocks, tied heads, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from ipu_tune.config import HfConfig, ModelConfig, load_config
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import ModelProfile, hf_identity, profile_model
from ipu_tune.models._hf_config import LABEL_TASKS, hf_config
from tests.conftest import REPO

# (model type, task, config overrides, sequence length): the covered families, small sizes
# except the 24-layer models the issue names.
BERT_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096}
COVERED = [
    ("bert", "masked-lm", BERT_LARGE, 128),
    ("roberta", "masked-lm", {"num_hidden_layers": 2}, 128),
    ("gpt2", "causal-lm", {"n_embd": 1024, "n_layer": 24, "n_head": 16}, 1024),
    ("llama", "causal-lm", {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "intermediate_size": 688,
                            "vocab_size": 32000}, 256),
    ("vit", "image-classification", {"num_hidden_layers": 2}, None),
    ("t5", "seq2seq-lm", {"num_layers": 2, "num_decoder_layers": 2}, 128),
    ("bert", "sequence-classification", {"num_hidden_layers": 2}, 128),
    ("bert", "question-answering", {"num_hidden_layers": 2}, 384),
    ("roberta", "token-classification", {"num_hidden_layers": 2}, 128),
    ("gpt2", "token-classification", {"n_layer": 2}, 128),
]
AUTO = {"masked-lm": "AutoModelForMaskedLM", "causal-lm": "AutoModelForCausalLM",
        "image-classification": "AutoModelForImageClassification",
        "seq2seq-lm": "AutoModelForSeq2SeqLM",
        "sequence-classification": "AutoModelForSequenceClassification",
        "question-answering": "AutoModelForQuestionAnswering",
        "token-classification": "AutoModelForTokenClassification"}


def _hf(profile_of: Any, model_type: str, task: str, config: dict[str, Any],
        seq: int | None, **extra: Any) -> ModelProfile:
    hf = {"model_type": model_type, "task": task, "config": config}
    labels = {"num_classes": 3} if task in LABEL_TASKS else {}  # the heads that read them
    return profile_of(name="hf", hf=hf, sequence_length=seq, **labels, **extra)


def _reference(model_type: str, task: str, config: dict[str, Any]) -> torch.nn.Module:
    """The same model built by Transformers alone (its own count is the reference)."""
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    if task.endswith("classification"):
        cfg.num_labels = 3
    with torch.device("meta"):
        model: torch.nn.Module = getattr(transformers, AUTO[task]).from_config(cfg)
    return model


@pytest.mark.parametrize(("model_type", "task", "config", "seq"), COVERED,
                         ids=[f"{c[0]}-{c[1]}" for c in COVERED])
def test_parameter_count_equals_transformers_num_parameters(
    profile_of: Any, model_type: str, task: str, config: dict[str, Any], seq: int | None
) -> None:
    profile = _hf(profile_of, model_type, task, config, seq)
    assert profile.parameters == _reference(model_type, task, config).num_parameters()


@pytest.mark.parametrize(("model_type", "task", "config", "first", "layers"), [
    ("bert", "masked-lm", {"num_hidden_layers": 2}, "bert.embeddings",
     ["bert.encoder.layer.0", "bert.encoder.layer.1"]),
    ("gpt2", "causal-lm", {"n_layer": 2}, "transformer.wte",
     ["transformer.h.0", "transformer.h.1"]),
    ("llama", "causal-lm", COVERED[3][2], "model.embed_tokens",
     [f"model.layers.{i}" for i in range(4)]),
    ("t5", "seq2seq-lm", COVERED[5][2], "encoder.embed_tokens",
     ["encoder.block.0", "encoder.block.1", "decoder.block.0", "decoder.block.1"]),
])
def test_blocks_are_the_embeddings_then_the_models_own_layers(
    profile_of: Any, model_type: str, task: str, config: dict[str, Any], first: str,
    layers: list[str],
) -> None:
    profile = _hf(profile_of, model_type, task, config, 64)
    assert profile.blocks == [first, *layers]
    model = _reference(model_type, task, config)
    for name in layers:  # the names address the Transformers model's own modules
        model.get_submodule(name)


# Model types without an entry in DEFAULT_TASKS: their usual head comes from Transformers' auto
# classes, their layer lists from the config's counts (DistilBERT's n_layers, ConvNeXt's and
# ResNet's stages, with each stage's layers), or none (ALBERT runs one shared layer: one block).
FOUND = [
    ("distilbert", {"n_layers": 2, "dim": 64, "hidden_dim": 128, "n_heads": 2}, "masked-lm",
     ["distilbert.embeddings", "distilbert.transformer.layer.0", "distilbert.transformer.layer.1"]),
    ("albert", {"num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 128,
                "num_attention_heads": 2, "embedding_size": 32}, "masked-lm",
     ["albert.embeddings"]),
    # DeBERTa's padding warning reads token values: skipped, it computes nothing.
    ("deberta-v2", {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                    "num_attention_heads": 2, "vocab_size": 1000}, "masked-lm",
     ["deberta.embeddings", "deberta.encoder.layer.0", "deberta.encoder.layer.1"]),
    ("falcon", {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
                "vocab_size": 1000}, "causal-lm",
     ["transformer.word_embeddings", "transformer.h.0", "transformer.h.1"]),
    ("convnext", {"depths": [1, 2], "hidden_sizes": [8, 16], "num_stages": 2},
     "image-classification", ["convnext.encoder.stages.0", "convnext.encoder.stages.1",
                              "convnext.encoder.stages.1.layers.0",
                              "convnext.encoder.stages.1.layers.1"]),
    ("resnet", {"depths": [1, 2], "hidden_sizes": [16, 32], "embedding_size": 8},
     "image-classification", ["resnet.encoder.stages.0", "resnet.encoder.stages.1",
                              "resnet.encoder.stages.1.layers.1"]),
]


@pytest.mark.parametrize(("model_type", "config", "task", "blocks"), FOUND,
                         ids=[c[0] for c in FOUND])
def test_usual_head_and_layers_are_found_for_types_the_zoo_does_not_name(
    profile_of: Any, model_type: str, config: dict[str, Any], task: str, blocks: list[str],
) -> None:
    image = task == "image-classification"  # reads pixels and labels; the others, tokens
    given = {"num_classes": 3} if image else {"sequence_length": 32}
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config}, **given)
    assert hf_identity(ModelConfig(name="hf", hf=HfConfig(model_type=model_type)))[1] == task
    assert profile.blocks == blocks
    assert profile.parameters == _reference(model_type, task, config).num_parameters()
    if task == "image-classification":  # ResNet's config states no size: the processors' 224
        assert tuple(profile.input_shape) == (3, 224, 224)


def test_tied_lm_head_runs_in_the_first_block_and_an_untied_one_in_the_last(
    profile_of: Any,
) -> None:
    gpt2 = _hf(profile_of, "gpt2", "causal-lm", {"n_layer": 2}, 64)
    head = [op for op in gpt2.ops if op.name.startswith("lm_head")]
    assert head and all(op.block == 0 for op in head)
    # The last stage sends hidden states (n_embd per token) back, not logits.
    assert gpt2.block_stats[-1].output_elements == 64 * 768
    llama = _hf(profile_of, "llama", "causal-lm", COVERED[3][2], 64)
    untied = [op for op in llama.ops if op.name.startswith("lm_head")]
    assert untied and all(op.block == len(llama.block_stats) - 1 for op in untied)
    # Ops stay grouped by block, and block totals still add up to the ops'.
    for profile in (gpt2, llama):
        for b, stats in enumerate(profile.block_stats):
            ops = profile.ops[stats.first_op:stats.last_op]
            assert all(op.block == b for op in ops)
            assert stats.parameters == sum(op.parameters for op in ops)


def test_squad_head_runs_after_the_last_layer_on_every_token(profile_of: Any) -> None:
    """BertForQuestionAnswering's span head (`qa_outputs`, hidden -> 2) is not tied: it stays on
    the last stage, as optimum-graphcore's PipelinedBertForQuestionAnswering places it, and
    scores each of the sequence's tokens."""
    profile = _hf(profile_of, "bert", "question-answering", {"num_hidden_layers": 2}, 384)
    head = [op for op in profile.ops if op.name.startswith("qa_outputs")]
    assert head and all(op.block == len(profile.block_stats) - 1 for op in head)
    assert sum(op.parameters for op in head) == 768 * 2 + 2
    assert not any(op.name.startswith("cls") for op in profile.ops)  # no masked-LM head


def test_masked_positions_run_the_tied_head_on_that_many_tokens(profile_of: Any) -> None:
    """`model.kwargs.masked_positions` gathers as optimum-graphcore does before the MLM head
    (`config.max_num_masked_tokens`): Transformers' BERT-Large then costs what the zoo's BERT-Large
    with Graphcore's 20 masked tokens costs, and only the head's cost changes."""
    every = _hf(profile_of, "bert", "masked-lm", BERT_LARGE, 128)
    masked = _hf(profile_of, "bert", "masked-lm", BERT_LARGE, 128,
                 kwargs={"masked_positions": 20})  # fmt: skip
    zoo = profile_of(name="bert_large", sequence_length=128, kwargs={"masked_positions": 20})
    assert masked.forward_flops == pytest.approx(zoo.forward_flops, rel=1e-3)
    assert masked.parameters == every.parameters
    head = [op.name.startswith("cls") for op in every.ops]
    flops = {p: sum(op.forward_flops for op, h in zip(p.ops, head, strict=True) if h)
             for p in (every, masked)}  # fmt: skip
    assert flops[masked] < 0.2 * flops[every]
    assert every.forward_flops - masked.forward_flops == pytest.approx(
        flops[every] - flops[masked], rel=1e-6)


@pytest.mark.parametrize(("kwargs", "task", "message"), [
    ({"masked_positions": 200}, "masked-lm", "masked_positions=200: an integer from 1 to"),
    ({"masked_positions": 20}, "sequence-classification", "only for a masked-lm head"),
    ({"dropout": 0.0}, "masked-lm", "model.kwargs.dropout=0.0: only masked_positions"),
])
def test_bad_masked_positions_are_one_line(
    profile_of: Any, kwargs: dict[str, Any], task: str, message: str
) -> None:
    with pytest.raises(IpuTuneError) as err:
        _hf(profile_of, "bert", task, {"num_hidden_layers": 2}, 128, kwargs=kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_bert_squad_presets_are_the_published_sizes(profile_of: Any) -> None:
    # BertForQuestionAnswering.num_parameters() of bert-base-uncased / bert-large-uncased sizes.
    large = transformers.BertConfig(**BERT_LARGE)
    with torch.device("meta"):
        expected = transformers.AutoModelForQuestionAnswering.from_config(large).num_parameters()
    assert profile_of(name="bert_large_squad", sequence_length=128).parameters == expected
    assert expected == 334_094_338
    assert profile_of(name="bert_base_squad", sequence_length=128).parameters == 108_893_186


def test_config_file_builds_the_model_it_describes(profile_of: Any, tmp_path: Path) -> None:
    config = transformers.BertConfig(**BERT_LARGE).to_dict()
    (tmp_path / "config.json").write_text(json.dumps(config))
    profile = profile_of(name="hf", hf={"config_file": str(tmp_path / "config.json")},
                         sequence_length=128)
    assert profile.parameters == 335_174_458  # bert-large-uncased's BertForMaskedLM
    assert profile.blocks[1] == "bert.encoder.layer.0" and len(profile.blocks) == 25


@pytest.mark.parametrize(("architecture", "head"), [
    ("BertForQuestionAnswering", "qa_outputs"), ("BertForMaskedLM", "cls"),
    ("BertForSequenceClassification", "classifier")])
def test_a_config_file_builds_the_head_it_was_saved_with(
    profile_of: Any, tmp_path: Path, architecture: str, head: str
) -> None:
    """A downloaded model folder names its class ("architectures"): a SQuAD checkpoint profiles
    with its span head, not the model type's usual masked-LM head; `model.hf.task` still wins."""
    config = transformers.BertConfig(num_hidden_layers=2, architectures=[architecture])
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    hf = {"config_file": str(tmp_path)}
    profile = profile_of(name="hf", hf=hf, sequence_length=128)
    assert any(op.name.startswith(head) for op in profile.ops)
    told = profile_of(name="hf", hf={**hf, "task": "masked-lm"}, sequence_length=128)
    assert any(op.name.startswith("cls") for op in told.ops)
    model = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))
    assert hf_identity(model)[1] == {"qa_outputs": "question-answering", "cls": "masked-lm",
                                     "classifier": "sequence-classification"}[head]


@pytest.mark.parametrize(("architecture", "task"), [
    ("PipelinedBertForPreTraining", "masked-lm"),  # as optimum-graphcore saves its classes
    ("BertLMHeadModel", "causal-lm"),
    # As Transformers' auto classes read a config: the model is its model_type's, the head
    # the class name's (published configs name other families' or other casings' classes:
    # a Mistral model saved as LlamaForCausalLM, MPT's MPTForCausalLM); its own code is never
    # run (`auto_map`).
    ("LlamaForCausalLM", "causal-lm"), ("EvilModel", "feature-extraction")])
def test_the_head_is_read_from_the_saved_class_name_as_transformers_reads_it(
        tmp_path: Path, architecture: str, task: str) -> None:
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "bert", "num_hidden_layers": 2, "architectures": [architecture],
        "auto_map": {"AutoModel": "modeling_evil.EvilModel"}}))
    model = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))
    assert hf_identity(model)[1] == task


def test_gpt2_zoo_sizes_have_the_published_parameter_counts(profile_of: Any) -> None:
    # GPT2LMHeadModel.num_parameters() of the Hub's gpt2 / gpt2-medium (tied head).
    assert profile_of(name="gpt2", sequence_length=64).parameters == 124_439_808
    assert profile_of(name="gpt2_medium", sequence_length=64).parameters == 354_823_168


def test_a_bad_value_in_a_config_file_names_the_file_not_the_overrides(
        profile_of: Any, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "bert", "torch_dtype": "evil", "num_hidden_layers": 2}))
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"config_file": str(tmp_path), "config": {"hidden_size": 64}})
    assert str(err.value).startswith(f"model.hf.config_file='{tmp_path}': BertConfig: ")


@pytest.mark.parametrize(("fields", "message"), [
    ({"hf": {"model_type": "gpt9"}}, "model.hf.model_type='gpt9'"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layers": 2}}},
     "model.hf.config.n_layers: no field of GPT2Config"),
    ({"hf": {"model_type": "gpt2", "task": "translation"}}, "model.hf.task='translation'"),
    ({"hf": {}}, "model.hf.model_type: missing"),
    # Layer counts out of 1..1024: none (a model with no layers) or past any model (for ever).
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": -1}}}, "model.hf.config.n_layer=-1"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 0}}}, "model.hf.config.n_layer=0"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 10**9}}},
     "model.hf.config.n_layer=1000000000: a layer count from 1 to 1024"),
    ({"hf": {"model_type": "clip", "config": {"text_config": {"num_hidden_layers": 5000}}}},
     "model.hf.config.text_config.num_hidden_layers=5000"),
    # Sizes out of 1..2^24: a model of no width or heads divides by zero, a negative side is a
    # negative dimension, a billion labels (or a width of 10^30) builds for ever or overflows.
    ({"hf": {"model_type": "bert", "config": {"hidden_size": 0}}},
     "model.hf.config.hidden_size=0: a size from 1 to 16,777,216 (2^24)"),
    ({"hf": {"model_type": "vit", "config": {"image_size": -224}}},
     "model.hf.config.image_size=-224: a size from 1"),
    ({"hf": {"model_type": "yolos", "config": {"image_size": [512, 0]}}},
     "model.hf.config.image_size=[512, 0]: a size from 1"),
    ({"hf": {"model_type": "llama", "config": {"num_key_value_heads": 0}}},
     "model.hf.config.num_key_value_heads=0"),
    ({"hf": {"model_type": "gpt2", "config": {"n_positions": 0}}}, "model.hf.config.n_positions=0"),
    ({"hf": {"model_type": "bert", "task": "sequence-classification",
             "config": {"num_labels": 10**9}}}, "model.hf.config.num_labels=1000000000"),
    ({"hf": {"model_type": "bert", "config": {"vision_config": {"hidden_size": 10**30}}}},
     "model.hf.config.vision_config.hidden_size=1000000000000000000000000000000"),
    ({"hf": {"model_type": "bert", "config": {"pad_token_id": 2**40}}},
     "model.hf.config.pad_token_id=1099511627776: an integer within +-2,147,483,647"),
    # A Transformers model's pixels are its config's: another shape would be ignored.
    ({"hf": {"model_type": "vit", "config": {"num_hidden_layers": 1}},
      "input_shape": [3, 768, 768]},
     "model.input_shape=[3, 768, 768]: not read by a Transformers model, whose images "
     "model.hf.config.image_size (num_channels) sets ([3, 224, 224] here)"),
    # Autograd's backward through 4,096 GPT-2 layers overflowed the C stack (a segfault).
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 4096}}},
     "model.hf.config.n_layer=4096: a layer count from 1 to 1024"),
    # Per-stage widths, and floats that are not numbers (their export would write None).
    ({"hf": {"model_type": "resnet", "config": {"hidden_sizes": [64, 64, 64, 2**30]}}},
     "model.hf.config.hidden_sizes=[64, 64, 64, 1073741824]: a size from 1"),
    ({"hf": {"model_type": "gpt2", "config": {"layer_norm_epsilon": float("inf")}}},
     "model.hf.config.layer_norm_epsilon=inf: a finite number (not inf or nan)"),
    ({"hf": {"model_type": "gpt2", "config": {"text_config": {"x": [1.0, float("nan")]}}}},
     "model.hf.config.text_config.x=[1.0, nan]: a finite number"),
    ({"hf": {"model_type": "gpt2"}, "sequence_length": 4096}, "model.sequence_length=4096"),
    # A size or layer count that is no integer (an alias too, which Transformers leaves
    # unchecked), and a value of another type than a config class's field: the field, not
    # the model type, and the sub-config's field, not a top-level one of the same name.
    ({"hf": {"model_type": "gpt2", "config": {"n_embd": 1e30}}},
     "model.hf.config.n_embd=1e+30: a size from 1 to 16,777,216 (2^24), an integer"),
    ({"hf": {"model_type": "gpt2", "config": {"num_hidden_layers": 2.5}}},
     "model.hf.config.num_hidden_layers=2.5: a layer count from 1 to 1024, an integer"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 2, "n_head": "12"}}},
     "model.hf.config.n_head='12': a size from 1"),
    ({"hf": {"model_type": "bert", "config": {"num_hidden_layers": 1, "hidden_act": 3}}},
     "model.hf.config.hidden_act=3: BertConfig takes str here, not int"),
    ({"hf": {"model_type": "mamba2", "config": {"num_hidden_layers": 1,
                                                 "time_step_limit": [0, 1]}}},
     "model.hf.config.time_step_limit=[0, 1]: Mamba2Config takes one of list[float], "
     "tuple[float, ...] here"),
    ({"hf": {"model_type": "llava", "config": {
        "tie_word_embeddings": False,
        "text_config": {"num_hidden_layers": 2, "tie_word_embeddings": "no"}}}},
     "model.hf.config.text_config.tie_word_embeddings='no': text_config's config takes bool "
     "here, not str"),
    ({"hf": {"config_file": "/nonexistent/config.json"}}, "model.hf.config_file="),
    ({"hf": {"model_type": "whisper", "task": "causal-lm", "config": {"decoder_layers": 0}}},
     "model.hf.config.decoder_layers=0"),
    # Transformers 5.23 cannot build LFM2-MoE from its config class's defaults (layer_types
    # None: which layers are convolutions is the checkpoint's).
    ({"hf": {"model_type": "lfm2_moe"}},
     "model.hf.model_type='lfm2_moe': Transformers cannot build it on the meta device"),
    # A value the config class takes but torch refuses: named by its key (the model builds
    # without it), not blamed on the model type.
    ({"hf": {"model_type": "bert", "config": {"num_hidden_layers": 1,
                                               "pad_token_id": 99_999_999}}},
     "model.hf.config.pad_token_id=99999999: Transformers cannot build it on the meta device "
     "(AssertionError: Padding_idx must be within num_embeddings)"),
    # Two values that clash: each one's removal builds, so both are named.
    ({"hf": {"model_type": "bert", "config": {"num_hidden_layers": 1, "vocab_size": 100,
                                               "pad_token_id": 500}}},
     "model.hf.config: vocab_size=100, pad_token_id=500: Transformers cannot build it on the "
     "meta device (AssertionError: Padding_idx must be within num_embeddings); allowed: values "
     "that build together"),
    # Without vocab_size 0 it builds (ipu-tune's table check then refuses type_vocab_size 0):
    # vocab_size is named first, not the model type.
    ({"hf": {"model_type": "bert", "config": {"num_hidden_layers": 1, "vocab_size": 0,
                                               "type_vocab_size": 0}}},
     "model.hf.config.vocab_size=0: Transformers cannot build it on the meta device"),
    # One class named without a list's brackets is read as the list of it.
    ({"hf": {"model_type": "bert", "config": {"num_hidden_layers": 1,
                                               "architectures": "BertForNextSentencePrediction"}}},
     "model.hf.config.architectures='BertForNextSentencePrediction': "
     "BertForNextSentencePrediction is a head ipu-tune does not build"),
    # Audio models.
    ({"hf": {"model_type": "wav2vec2"}, "sequence_length": 100},
     "model.sequence_length=100: at least 400 samples"),
    ({"hf": {"model_type": "whisper"}, "sequence_length": 1000},
     "model.sequence_length=1000: at most 448 decoder tokens (max_target_positions"),
    ({"hf": {"model_type": "audio-spectrogram-transformer"}, "sequence_length": 500},
     "model.sequence_length=500: unset or 1024"),
    ({"hf": {"model_type": "wav2vec2", "task": "masked-lm"}}, "model.hf.task='masked-lm'"),
    ({"hf": {"model_type": "bert", "task": "ctc"}},
     "model.hf.task='ctc': a head Transformers builds for bert: masked-lm, causal-lm,"),
    # The head exists, but its config class's defaults do not build it (Transformers fails too).
    ({"hf": {"model_type": "cohere_compass_text"}},
     "model.hf.model_type='cohere_compass_text': Transformers cannot build it as causal-lm from "
     "its config class's defaults (KeyError"),
    # A head that exists but a setting that does not build it names the setting, not the task.
    ({"hf": {"model_type": "bert", "config": {"hidden_act": "os.system"}}},
     "model.hf.config={'hidden_act': 'os.system'}: its masked-lm model does not build: "
     "KeyError: 'os.system'"),
    ({"hf": {"model_type": "bert", "config": {"torch_dtype": "evil"}}},
     "model.hf.config={'torch_dtype': 'evil'}: BertConfig: AttributeError"),
    ({"hf": {"model_type": "wav2vec2"}, "kwargs": {"masked_positions": 20}},
     "model.kwargs.masked_positions=20"),
    ({"hf": {"model_type": "wav2vec2"}, "dataset": {"sequences_per_pack": 2.0}},
     "model.dataset.sequences_per_pack=2.0: packs hold token sequences: 1.0 for a model of audio"),
])
def test_bad_hf_settings_end_in_one_line_naming_the_key(
    profile_of: Any, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", **fields)
    text = str(err.value)
    assert text.startswith(message) and "\n" not in text


@pytest.mark.slow
def test_a_24_layer_transformer_profiled_once_is_read_from_the_disk_cache(tmp_path: Path) -> None:
    """A second process reads the profile the first wrote (how long each takes is measured by
    benchmarks/profile_speed.py, not here)."""
    script = (
        "from ipu_tune.config import ModelConfig, HfConfig\n"
        "from ipu_tune.models import profile_model\n"
        "hf = HfConfig(model_type='gpt2', config={'n_embd': 1024, 'n_layer': 24, 'n_head': 16})\n"
        "p = profile_model(ModelConfig(name='hf', hf=hf, sequence_length=1024))\n"
        "print(len(p.ops), sum(o.forward_flops for o in p.ops))\n"
    )
    env = {**os.environ, "IPU_TUNE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}

    def profiled() -> tuple[str, dict[str, int]]:
        out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                             capture_output=True, text=True).stdout
        files = {str(f): f.stat().st_mtime_ns for f in tmp_path.rglob("*") if f.is_file()}
        return out, files

    first, written = profiled()
    assert written  # the first process wrote its profile
    second, after = profiled()
    assert second == first and after == written  # read back, nothing traced or written again


def test_a_position_limit_of_minus_one_is_no_limit() -> None:
    """XLNet's `max_position_embeddings: -1` (relative positions) bounds no sequence length;
    a positive limit still does."""
    from types import SimpleNamespace

    from ipu_tune.models._hf import _sequence_length

    cfg = ModelConfig(name="hf", sequence_length=4096)
    assert _sequence_length(cfg, SimpleNamespace(max_position_embeddings=-1)) == 4096
    with pytest.raises(IpuTuneError, match=r"model\.sequence_length=4096: at most 512"):
        _sequence_length(cfg, SimpleNamespace(max_position_embeddings=512))
    # Not given: 128 tokens, or a shorter limit (CLIP's text tower, 77), which the hf preset
    # leaves it to.
    unset = ModelConfig(name="hf")
    assert _sequence_length(unset, SimpleNamespace(max_position_embeddings=77)) == 77
    assert _sequence_length(unset, SimpleNamespace(max_position_embeddings=-1)) == 128
    assert _sequence_length(unset, SimpleNamespace(n_positions=1024)) == 128
    assert load_config({"model": {"name": "hf"}}).model.sequence_length is None


# Types whose masks Transformers tests by value (`padding_mask.all()`, recurrent layers'
# `torch.all(attention_mask == 1)`): on the meta device those tests are left out as
# Transformers leaves them out while tracing, and the model profiles.
VALUE_TESTS = [
    ("megatron-bert", {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                       "num_attention_heads": 2, "vocab_size": 1000}, "masked-lm"),
    ("roformer", {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                  "num_attention_heads": 2, "vocab_size": 1000, "embedding_size": 64},
     "masked-lm"),
    ("mamba2", {"num_hidden_layers": 2, "hidden_size": 64, "num_heads": 4, "head_dim": 32,
                "vocab_size": 1000, "n_groups": 1, "state_size": 16}, "causal-lm"),
]


@pytest.mark.parametrize(("model_type", "config", "task"), VALUE_TESTS,
                         ids=[c[0] for c in VALUE_TESTS])
def test_models_that_test_mask_values_profile_on_the_meta_device(
    profile_of: Any, model_type: str, config: dict[str, Any], task: str
) -> None:
    from transformers import masking_utils
    from transformers.utils import import_utils

    before = import_utils.is_tracing
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config},
                         sequence_length=32)
    assert profile.parameters == _reference(model_type, task, config).num_parameters()
    # Outside the profiler Transformers' own test is back in every module that holds it.
    assert import_utils.is_tracing is before and masking_utils.is_tracing is before


def test_mixture_of_experts_counts_the_routed_experts_and_holds_them_all(
    profile_of: Any,
) -> None:
    hidden, inter, experts, top_k, vocab, seq = 64, 96, 8, 2, 1000, 32
    config = {"num_hidden_layers": 1, "hidden_size": hidden, "intermediate_size": inter,
              "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": vocab,
              "num_local_experts": experts, "num_experts_per_tok": top_k}
    profile = profile_of(name="hf", hf={"model_type": "mixtral", "config": config},
                         sequence_length=seq)
    assert profile.parameters == _reference("mixtral", "causal-lm", config).num_parameters()
    # Each token runs its top-k experts (gate, up, down: 3 matmuls), whatever the routing.
    routed = [op for op in profile.ops if op.name.endswith("experts.grouped_mm")]
    assert sum(op.forward_flops for op in routed) == seq * top_k * 3 * 2 * hidden * inter
    assert all(op.kind == "matmul" and op.m_per_sample == seq * top_k for op in routed)
    assert sum(op.backward_flops for op in routed) == 2 * seq * top_k * 3 * 2 * hidden * inter


def test_a_task_with_two_classes_builds_the_first_when_no_architecture_is_saved(
    profile_of: Any,
) -> None:
    # DeiT's image classifiers are two classes; its config class saves no architecture, which
    # Transformers' auto class fails on: the first (plain) classifier is built.
    config = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
              "num_attention_heads": 2}
    profile = profile_of(name="hf", hf={"model_type": "deit", "config": config}, num_classes=3)
    cfg = transformers.DeiTConfig(**config, num_labels=3)
    with torch.device("meta"):
        reference = transformers.DeiTForImageClassification(cfg)
    assert profile.parameters == reference.num_parameters()
    assert profile.blocks == ["deit.embeddings", "deit.layers.0", "deit.layers.1"]


@pytest.mark.parametrize(("model_type", "config", "kind", "auto"), [
    ("clip_vision_model", {"num_hidden_layers": 2}, "image", transformers.CLIPVisionModel),
    ("clip_text_model", {"num_hidden_layers": 2}, "tokens", transformers.CLIPTextModel),
    # Towers Transformers' auto classes do not register: built by their base model class.
    ("siglip_text_model", {"num_hidden_layers": 2}, "tokens", transformers.SiglipTextModel),
    ("blip_vision_model", {"num_hidden_layers": 2}, "image", transformers.BlipVisionModel),
    # A vision tower that keeps PreTrainedModel's main input, input_ids: fed its pixels.
    ("smolvlm_vision", {"num_hidden_layers": 2}, "image",
     transformers.SmolVLMVisionTransformer),
])
def test_a_tower_without_a_head_profiles_its_features(
    profile_of: Any, model_type: str, config: dict[str, Any], kind: str, auto: type
) -> None:
    """A type whose only model class is its base model (a tower) is built without a head, on
    its one input; its parameters are Transformers' own."""
    model = ModelConfig(name="hf", hf=HfConfig(model_type=model_type, config=config))
    assert hf_identity(model)[1] == "feature-extraction"
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config})
    assert profile.input_kind == kind
    with torch.device("meta"):
        reference = auto(transformers.AutoConfig.for_model(model_type, **config))
    assert profile.parameters == reference.num_parameters()
    assert profile.blocks[-1].endswith("layers.1")


@pytest.mark.parametrize(("model_type", "config", "words"), [
    # A vision-language model's base model (no head) given ids alone: its vision tower never
    # runs (its usual head, image-text-to-text, reads both: tests/models/test_hf_vision_text).
    ("llava", {"text_config": {"num_hidden_layers": 1}, "vision_config": {"num_hidden_layers": 1}},
     "on input_ids alone its vision_tower"),
    ("dac", {}, "dac reads input_values"),  # an audio codec: not ids or pixels
])
def test_a_model_of_several_inputs_is_refused_naming_them(
    profile_of: Any, model_type: str, config: dict[str, Any], words: str
) -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": model_type, "config": config,
                                  "task": "feature-extraction"})
    msg = str(err.value)
    assert "\n" not in msg and "model.hf.task='feature-extraction'" in msg
    assert words in msg and "model._target_" in msg


def test_a_base_model_failing_on_its_one_input_names_the_others(profile_of: Any) -> None:
    """ViLT's base model wants pixels beside its ids: the refusal says so, not that the meta
    device is to blame (it fails the same on any device)."""
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": "vilt", "config": {"num_hidden_layers": 1}})
    msg = str(err.value)
    assert msg.startswith("model.hf.model_type='vilt': cannot run forward and backward on "
                          "input_ids alone (ValueError: ")
    assert msg.endswith("it reads another input (pixel_values): profile it as a factory of "
                        "your own taking one tensor (model._target_, docs/models.md)")


def test_a_config_saved_from_a_base_model_builds_it(tmp_path: Path) -> None:
    config = transformers.BertConfig(num_hidden_layers=2, architectures=["BertModel"])
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    model = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))
    assert hf_identity(model)[1] == "feature-extraction"


def test_a_config_file_value_of_another_type_names_its_field(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"model_type": "gpt2", "n_layer": 2, "layer_norm_epsilon": 1}')
    with pytest.raises(IpuTuneError) as err:
        hf_config(ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path / "config.json"))))
    assert str(err.value).endswith(
        "field layer_norm_epsilon=1: GPT2Config takes float here, not int")


@pytest.mark.parametrize("fields", [
    # What the class's own default holds is allowed there (published Hub configs).
    {"model_type": "dpr", "num_hidden_layers": 2, "projection_dim": 0},  # no projection
    {"model_type": "swinv2", "pretrained_window_sizes": [0, 0, 0, 0]},
    # Transformers 5 writes a float JSON cannot hold as {"__float__": ...} and reads it back.
    {"model_type": "mamba2", "num_hidden_layers": 2, "time_step_limit": [
        0.0, {"__float__": "Infinity"}]},
    {"model_type": "mamba2", "num_hidden_layers": 2, "time_step_limit": [0.0, float("inf")]},
])
def test_a_config_file_holding_its_class_defaults_is_read(
        tmp_path: Path, fields: dict[str, Any]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(fields))
    config = hf_config(ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path))))
    assert config.model_type == fields["model_type"]
    if "time_step_limit" in fields:
        assert list(config.time_step_limit) == [0.0, float("inf")]


def test_a_config_file_past_the_layer_bound_exits_2_naming_its_field(tmp_path: Path) -> None:
    """A config.json of 10**9 layers built for ever; now one line naming the file's field."""
    from tests.conftest import run_cli

    (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_layer": 1000000000}')
    done = run_cli(["model=hf", f"model.hf.config_file={tmp_path / 'config.json'}",
                    "study.storage=memory", "study.progress_bar=false"], tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "field n_layer=1000000000: a layer count from 1 to 1024" in line


def test_a_tower_wanting_a_required_input_besides_its_pixels_names_it(profile_of: Any) -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": "gemma4_vision",
                                  "config": {"num_hidden_layers": 1}})
    msg = str(err.value)
    assert "cannot run forward and backward on pixel_values alone (" in msg
    assert "it reads another input (pixel_position_ids): profile it as a factory" in msg


def test_a_misspelt_config_field_names_the_nearest_fields_first() -> None:
    """`n_layr` listed GPT2Config's fields from `activation_function` on, cut before `n_layer`."""
    from ipu_tune.models import profile_model

    cfg = ModelConfig(name="hf", hf=HfConfig(model_type="gpt2", config={"n_layr": 4}))
    with pytest.raises(IpuTuneError) as err:
        profile_model(cfg)
    assert str(err.value).startswith(
        "model.hf.config.n_layr: no field of GPT2Config; its fields: n_layer, ")


def test_a_config_files_own_labels_are_its_heads_unless_given_alike(tmp_path: Path) -> None:
    """A fine-tuned checkpoint's config.json names its labels (`id2label`; `num_labels` only
    when saved so): its head is built with them, not Transformers' default 2; a given
    `model.num_classes` of another count is refused, not silently replaced."""
    config = transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2,
                                     intermediate_size=128, architectures=[
                                         "BertForTokenClassification"],
                                     id2label={i: f"L{i}" for i in range(5)})
    data = config.to_dict()
    data.pop("num_labels", None)  # as save_pretrained writes it
    (tmp_path / "config.json").write_text(json.dumps(data))
    hf = HfConfig(config_file=str(tmp_path))
    for given in (None, 5):
        model = ModelConfig(name="hf", hf=hf, sequence_length=16, num_classes=given)
        assert profile_model(model).num_classes == 5
    with pytest.raises(IpuTuneError, match=r"^model.num_classes=9: unset or 5, the labels "
                       rf"model.hf.config_file='{tmp_path}' names$"):
        profile_model(ModelConfig(name="hf", hf=hf, sequence_length=16, num_classes=9))
