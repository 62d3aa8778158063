"""User mistakes in the model section raise IpuTuneError with one line."""

from __future__ import annotations

from typing import Any

import pytest

import ipu_tune
from ipu_tune import IpuTuneError
from ipu_tune.models import ZOO, profile_model

from .conftest import conf, model_cfg

F = "tests.models.factories"


def _error(**fields: object) -> str:
    with pytest.raises(IpuTuneError) as info:
        profile_model(model_cfg(**fields))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_unknown_zoo_name_lists_the_zoo() -> None:
    message = _error(name="resnet9000")
    assert "model.name='resnet9000'" in message
    for name in ZOO:
        assert name in message


def test_unknown_name_through_the_public_api() -> None:
    with pytest.raises(IpuTuneError, match="zoo models: resnet18"):
        ipu_tune.profile({"name": "alexnet"})


@pytest.mark.parametrize(
    ("target", "needle"),
    [
        ("no_such_package_xyz.make", "cannot import 'no_such_package_xyz'"),
        ("nodots", "dotted path"),
        (f"{F}.missing", "has no 'missing'"),
        (f"{F}.NOT_CALLABLE", "int is not callable"),
        (f"{F}.not_a_module", "returns int, not a torch.nn.Module"),
        (f"{F}.broken", "factory failed (RuntimeError: factory exploded second line)"),
        (f"{F}.reads_then_fails", "cannot run forward and backward on the meta device "
         "(RuntimeError: Tensor.item() cannot be called on meta tensors), nor on the CPU "
         "(ValueError: an input of zeros)"),
        (f"{F}.bad_blocks", "not in execution order"),
    ],
)
def test_broken_target(target: str, needle: str) -> None:
    message = _error(_target_=target, input_shape=[8])
    assert message.startswith("model._target_=") or "pipeline blocks" in message
    assert needle in message


def test_bad_kwargs_for_a_zoo_model() -> None:
    message = _error(name="resnet18", kwargs={"depth": 3})
    assert message.startswith("model.kwargs=") and "depth" in message


def test_bad_input_shape() -> None:
    assert _error(name="resnet18", input_shape=[3, 224]).startswith("model.input_shape=")
    assert _error(name="resnet18", input_shape=[3, 0, 8]).startswith("model.input_shape=")


def test_sequence_longer_than_bert_positions() -> None:
    message = _error(name="bert_base", sequence_length=1024)
    assert message.startswith("model.sequence_length=1024") and "512" in message


def test_missing_name() -> None:
    assert "model.name" in _error(name=None)


@pytest.mark.parametrize(("target", "given", "hint"), [
    # Ids given as floats reach an embedding; floats given as ids reach no embedding.
    ("token_classifier", {"input_shape": [6]}, "give model.sequence_length=TOKENS instead"),
    ("tiny_cnn", {"sequence_length": 8}, "give model.input_shape=[...] and leave"),
])
def test_a_factory_given_the_other_input_kind_is_told_which(
        target: str, given: dict[str, object], hint: str) -> None:
    message = _error(_target_=f"{F}.{target}", **given)
    assert "cannot run forward and backward on" in message and hint in message
    assert "meta device" not in message  # it fails on any device: its input is the other kind
    assert "may read" in message


@pytest.mark.parametrize(("fields", "needle"), [
    ({"name": "vit_b_16", "input_shape": [3, 224, 224], "sequence_length": 64},
     "model.sequence_length=64: unset: vit_b_16 reads images"),
    ({"name": "resnet18", "input_shape": [3, 32, 32], "sequence_length": 128},
     "model.sequence_length=128: unset: resnet18 reads images"),
    ({"name": "bert_base", "sequence_length": 128, "input_shape": [3, 4, 4]},
     "model.input_shape=[3, 4, 4]: unset: bert_base reads token ids"),
    ({"name": "hf", "hf": {"model_type": "vit"}, "sequence_length": 64},
     "model.sequence_length=64: unset: vit reads pixels alone, [3, 224, 224]"),
    ({"name": "hf", "hf": {"model_type": "convnext"}, "sequence_length": 9},
     "model.sequence_length=9: unset: convnext reads pixels alone"),
    ({"name": "hf", "hf": {"model_type": "gpt2"}, "input_shape": [3, 4, 4]},
     "model.input_shape=[3, 4, 4]: not read by a Transformers model, whose token ids"),
    ({"name": "bert_base", "sequence_length": 128, "dataset": {"name": "imagenet"}},
     "model.dataset.name='imagenet': holds image input, and model.name='bert_base' reads "
     "tokens input; allowed: openwebtext, squad, wikipedia, tokens, synthetic or generated"),
    ({"name": "resnet18", "input_shape": [3, 32, 32], "dataset": {"name": "wikipedia"}},
     "model.dataset.name='wikipedia': holds tokens input"),
    ({"name": "hf", "hf": {"model_type": "gpt2"}, "num_classes": 5},
     "model.num_classes=5: a causal-lm head of gpt2 reads no labels"),
    ({"name": "hf", "hf": {"model_type": "wav2vec2"}, "num_classes": 9},
     "model.num_classes=9: a ctc head of wav2vec2 reads no labels"),
    ({"name": "bert_base", "sequence_length": 128, "num_classes": 5},
     "model.num_classes=5: unset or 30522: bert_base's masked-LM head predicts its vocabulary"),
    ({"_target_": f"{F}.token_classifier", "sequence_length": 8, "input_shape": [3, 4, 4]},
     "model.input_shape=[3, 4, 4]: unset:"),
    ({"name": "hf", "hf": {"model_type": "wav2vec2"}, "dataset": {"name": "imagenet"}},
     "reads audio input; allowed: tokens, synthetic or generated"),
])
def test_a_key_the_model_does_not_read_is_refused_not_ignored(
        fields: dict[str, object], needle: str) -> None:
    """An image model reads its input shape, a token model its sequence length, and neither
    a dataset of the other's input: given, it would change nothing and say nothing."""
    assert needle in _error(**fields)


_TINY_BART = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
              "encoder_attention_heads": 2, "decoder_attention_heads": 2,
              "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 100}


def test_the_hf_presets_classes_are_unset_for_a_head_of_no_labels(profile_of: Any) -> None:
    """BART's own `num_labels` is 3: its seq2seq head, which reads no labels, was refused for
    the `model=hf` preset's 2, a value the user never gave; the preset now leaves it unset,
    and the 2 given is refused."""
    preset = conf("hf")
    assert preset["num_classes"] is None
    profile = profile_of(name="hf", num_classes=preset["num_classes"], sequence_length=16,
                         hf={"model_type": "bart", "config": _TINY_BART})
    assert profile.parameters > 0
    with pytest.raises(IpuTuneError, match=r"^model.num_classes=2: a seq2seq-lm head"):
        profile_model(model_cfg(name="hf", num_classes=2, sequence_length=16,
                                hf={"model_type": "bart", "config": _TINY_BART}))


def test_bart_sequence_classification_profiles_on_sequences_ending_in_their_end_token(
        profile_of: Any) -> None:
    """BART's classifier reads the hidden state at each sequence's end token and refuses a
    sequence without one; the meta device cannot run its check, so its step runs on the CPU,
    on stand-in ids a tokenizer would end so."""
    profile = profile_of(name="hf", num_classes=3, sequence_length=16,
                         hf={"model_type": "bart", "task": "sequence-classification",
                             "config": _TINY_BART})
    assert profile.parameters > 0


def test_a_head_transformers_does_not_build_names_the_ones_it_does() -> None:
    """The refusal quoted Transformers' list of every config class, cut mid-word at 300
    characters, and never said which heads the model type has."""
    message = _error(name="hf", hf={"model_type": "bart", "task": "token-classification",
                                    "config": _TINY_BART}, sequence_length=16)
    assert message == ("model.hf.task='token-classification': a head Transformers builds for "
                       "bart: masked-lm, causal-lm, sequence-classification, "
                       "question-answering, seq2seq-lm")
