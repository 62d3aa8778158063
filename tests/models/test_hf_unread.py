"""Keys a Transformers model does not read, refused whatever their value; the overrides its
forward fails on, named; and a type whose own task ipu-tune does not profile, said so."""

from __future__ import annotations

from typing import Any

import pytest

from ipu_tune import IpuTuneError
from ipu_tune.config import fill_old_defaults, forget_old_defaults
from ipu_tune.models import profile_model

from .conftest import model_cfg

_TINY = {"num_hidden_layers": 1, "hidden_size": 32, "intermediate_size": 64,
         "num_attention_heads": 2}


def _error(**fields: Any) -> str:
    with pytest.raises(IpuTuneError) as info:
        profile_model(model_cfg(**fields))
    return str(info.value)


@pytest.mark.parametrize(("fields", "needle"), [
    # The seed setting's shape and classes, given, are given: before, they passed as unset.
    ({"hf": {"model_type": "bert", "config": _TINY}, "input_shape": [3, 64, 64]},
     "model.input_shape=[3, 64, 64]: not read by a Transformers model, whose token ids "
     "model.sequence_length sets ([128] here); allowed: unset"),
    ({"hf": {"model_type": "vit", "config": _TINY}, "input_shape": [3, 64, 64]},
     "whose images model.hf.config.image_size (num_channels) sets ([3, 224, 224] here)"),
    ({"hf": {"model_type": "wav2vec2", "config": _TINY}, "input_shape": [3, 64, 64]},
     "whose audio model.sequence_length sets"),
    ({"hf": {"model_type": "whisper", "config": {"encoder_layers": 1, "decoder_layers": 1,
                                                 "d_model": 36}}, "input_shape": [80, 100]},
     "whose audio model.hf.config.num_mel_bins and model.hf.config.max_source_positions set "
     "([80, 3000] here)"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 1}}, "num_classes": 2},
     "model.num_classes=2: a causal-lm head of gpt2 reads no labels"),
    ({"hf": {"model_type": "gpt2", "config": {"n_layer": 1}}, "num_classes": 10},
     "model.num_classes=10: a causal-lm head of gpt2 reads no labels"),
    ({"hf": {"model_type": "vit", "config": _TINY}, "kwargs": {"depth": 3}},
     "model.kwargs.depth=3: only masked_positions for a Transformers model"),
    ({"name": "gpt2", "input_shape": [3, 64, 64]}, "model.input_shape=[3, 64, 64]: not read"),
])
def test_a_key_a_transformers_model_does_not_read_is_refused_at_any_value(
        fields: dict[str, Any], needle: str) -> None:
    assert needle in _error(**{"name": "hf", **fields})


def test_unset_keys_profile_and_a_span_head_takes_its_two_labels(profile_of: Any) -> None:
    assert profile_of(name="hf", hf={"model_type": "bert", "config": _TINY}).parameters > 0
    qa = {"model_type": "bert", "task": "question-answering", "config": _TINY}
    assert profile_of(name="hf", hf=qa, num_classes=2).parameters > 0


def test_a_config_stored_before_the_keys_could_be_unset_is_the_same_problem() -> None:
    """A study or export of then held the schema's values though no one gave them: its
    fingerprint matches today's, and read back, they are unset again."""
    old = {"model.name": "hf", "model.input_shape": [3, 64, 64], "model.num_classes": 2}
    new = {"model.name": "hf", "model.input_shape": None, "model.num_classes": None}
    assert fill_old_defaults(new) == old
    stored = {"model": {"name": "gpt2", "input_shape": [3, 64, 64], "num_classes": 10}}
    assert forget_old_defaults(stored) == {"model": {"name": "gpt2"}}
    mine = {"model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000}}
    assert forget_old_defaults(mine) == mine


_MOE = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 64,
        "moe_intermediate_size": 32, "num_experts": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 100}


@pytest.mark.parametrize(("hf", "needle"), [
    # Eight experts per token, the class's default, of four: topk fails in the forward pass.
    ({"model_type": "qwen3_moe", "config": _MOE},
     "model.hf.config.num_experts=4: the model's forward or backward fails with it "
     "(RuntimeError: "),
    ({"model_type": "llama", "config": {"num_key_value_heads": 3, "num_attention_heads": 4,
                                        "hidden_size": 48, "num_hidden_layers": 1,
                                        "vocab_size": 100}},
     "model.hf.config.num_key_value_heads=3: the model's forward or backward fails with it"),
])
def test_the_overrides_a_forward_fails_on_are_named(hf: dict[str, Any], needle: str) -> None:
    text = _error(name="hf", hf=hf)
    assert needle in text and "must be" in text and "model.hf.model_type" not in text


def test_a_detector_is_refused_as_a_task_ipu_tune_does_not_profile() -> None:
    """RT-DETR's usual head is object detection; ipu-tune's fallback, its base model, reads
    more than pixels: the refusal named model.hf.task, which the user never set."""
    text = _error(name="hf", hf={"model_type": "rt_detr"})
    assert text.startswith("model.hf.model_type='rt_detr': its task, object detection, is not "
                           "one ipu-tune profiles from Transformers")
    assert "model._target_" in text and "model.hf.task='" not in text
    assert _error(name="hf", hf={"model_type": "upernet"}).startswith(
        "model.hf.model_type='upernet': its task, semantic segmentation")
