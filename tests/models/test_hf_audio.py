"""Transformers audio models with their defaults: the heads, the input, the blocks, refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import hf_identity
from ipu_tune.models._hf_names import usual_task


def _reference(model_type: str, auto: str) -> int:
    """Transformers' own parameter count of the type's default config under `auto`."""
    config = transformers.AutoConfig.for_model(model_type)
    with torch.device("meta"):
        model = getattr(transformers, auto).from_config(config)
    return int(model.num_parameters())


def test_wav2vec2_profiles_20_s_of_16_khz_audio_through_its_ctc_head(profile_of: Any) -> None:
    profile = profile_of(name="hf", hf={"model_type": "wav2vec2"})
    assert profile.input_kind == "audio" and profile.input_shape == (320_000,)
    assert profile.paired_tokens == 0
    # wav2vec2-base with a CTC head of 32 characters: Transformers' own count, ~95 M.
    assert profile.parameters == _reference("wav2vec2", "AutoModelForCTC") == 94_396_320
    assert profile.blocks == ["wav2vec2.feature_extractor",
                              *(f"wav2vec2.encoder.layers.{i}" for i in range(12))]
    # 320,000 samples -> 999 frames of 768; a layer's FLOPs: its matmuls (4 d^2 + 2 d x 3072 per
    # frame) and attention (2 x frames^2 x d), 2 per multiply-accumulate.
    frames, d = 999, 768
    layer = 2 * frames * (4 * d * d + 2 * d * 3072) + 2 * 2 * frames * frames * d
    assert profile.block_stats[1].forward_flops == pytest.approx(layer, rel=0.01)
    # The feature encoder is frozen, as the example scripts and optimum train CTC: its convs
    # run forward only.
    convs = [o for o in profile.ops if ".conv_layers." in o.name and o.kind == "conv"]
    assert len(convs) == 7 and all(o.backward_flops == 0 and o.forward_flops > 0 for o in convs)
    assert profile.sample_bytes == 4 * 320_000


def test_model_sequence_length_sets_a_waveform_models_samples(profile_of: Any) -> None:
    profile = profile_of(name="hf", hf={"model_type": "hubert"}, sequence_length=16_000)
    assert profile.input_shape == (16_000,)
    assert profile.block_stats[-1].output_elements == 49 * 32  # 1 s: 49 frames of 32 logits


def test_whisper_profiles_its_30_s_features_and_128_decoder_tokens(profile_of: Any) -> None:
    profile = profile_of(name="hf", hf={"model_type": "whisper"})
    assert profile.input_kind == "audio" and profile.input_shape == (80, 3000)
    assert profile.paired_tokens == 128
    assert profile.parameters == _reference("whisper", "AutoModelForSpeechSeq2Seq")
    assert profile.blocks == ["model.encoder.conv1",
                              *(f"model.encoder.layers.{i}" for i in range(4)),
                              *(f"model.decoder.layers.{i}" for i in range(4))]
    # The decoder's token embedding and the tied projection run with decoder layer 0, as
    # optimum-graphcore places them (decoder_embedding_ipu): 51,865 x 384 weights there.
    decoder0 = profile.block_stats[5]
    assert decoder0.parameters > 51_865 * 384 > profile.block_stats[6].parameters
    assert any(o.name == "proj_out" and o.block == 5 for o in profile.ops)
    short = profile_of(name="hf", hf={"model_type": "whisper"}, sequence_length=32)
    assert short.paired_tokens == 32 and short.input_shape == (80, 3000)


@pytest.mark.parametrize(("model_type", "task"), [
    ("wav2vec2", "ctc"), ("hubert", "ctc"), ("wavlm", "ctc"), ("whisper", "speech-seq2seq"),
    ("speech_to_text", "speech-seq2seq"), ("audio-spectrogram-transformer", "audio-classification"),
    ("bert", "masked-lm"), ("gpt2", "causal-lm"),
])
def test_an_audio_type_gets_its_usual_head(model_type: str, task: str) -> None:
    assert usual_task(model_type) == task
    assert hf_identity(ModelConfig(name="hf", hf=HfConfig(model_type=model_type)))[1] == task


@pytest.mark.parametrize(("model_type", "architecture", "task"), [
    ("wav2vec2", "Wav2Vec2ForCTC", "ctc"),
    ("wav2vec2", "Wav2Vec2ForSequenceClassification", "audio-classification"),
    ("whisper", "WhisperForConditionalGeneration", "speech-seq2seq"),
    ("whisper", "WhisperForAudioClassification", "audio-classification"),
    ("bart", "BartForConditionalGeneration", "seq2seq-lm"),  # a text model's is seq2seq-lm
    ("bert", "BertForSequenceClassification", "sequence-classification"),
])
def test_a_config_files_architecture_names_the_head_by_what_the_type_reads(
    tmp_path: Path, model_type: str, architecture: str, task: str,
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": model_type, "architectures": [architecture]}))
    model = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))
    assert hf_identity(model)[1] == task


@pytest.mark.parametrize(("model_type", "architecture", "usual"), [
    ("wav2vec2", "Wav2Vec2ForPreTraining", "ctc"),
    ("bert", "BertForMultipleChoice", "masked-lm"),
])
def test_a_head_the_tool_does_not_build_is_named_not_replaced(
    tmp_path: Path, model_type: str, architecture: str, usual: str,
) -> None:
    """Another head than the file's would be profiled unseen: the user names the task."""
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": model_type, "architectures": [architecture]}))
    model = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path)))
    with pytest.raises(IpuTuneError, match=rf"^model.hf.config_file='.*': the config.json was "
                       rf"saved from {architecture} \(its \"architectures\"\), a head ipu-tune "
                       rf"does not build; name one of .* as model.hf.task \({model_type}'s "
                       rf"usual head is {usual}\)"):
        hf_identity(model)
    given = ModelConfig(name="hf", hf=HfConfig(model_type=model_type,
                                               config={"architectures": ["os.system"]}))
    with pytest.raises(IpuTuneError, match=r"^model.hf.config.architectures=\['os.system'\]: "
                       r"os.system is a head ipu-tune does not build; name one of "):
        hf_identity(given)
    # An empty string names no class: the usual head, as a config saved without one.
    empty = ModelConfig(name="hf", hf=HfConfig(model_type=model_type,
                                               config={"architectures": ""}))
    assert hf_identity(empty)[1] == usual
    named = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path), task=usual))
    assert hf_identity(named)[1] == usual


def test_audio_classification_and_speech2text_profile(profile_of: Any) -> None:
    ast = profile_of(name="hf", hf={"model_type": "audio-spectrogram-transformer"},
                     num_classes=5)
    assert ast.input_kind == "audio" and ast.input_shape == (1024, 128)
    assert ast.block_stats[-1].output_elements == 5
    s2t = profile_of(name="hf", hf={"model_type": "speech_to_text"})
    assert s2t.input_shape == (2000, 80) and s2t.paired_tokens == 128  # 20 s at a 10 ms hop
    assert s2t.blocks[0] == "model.encoder.conv"


def test_a_ctc_head_with_no_vocabulary_gets_wav2vec2s_characters(profile_of: Any) -> None:
    """Wav2Vec2-Conformer's config leaves the CTC vocabulary unset (Transformers refuses to
    build the head then): it gets Wav2Vec2Config's 32 characters, and profiles."""
    conformer = profile_of(name="hf", hf={"model_type": "wav2vec2-conformer"})
    assert conformer.input_kind == "audio" and conformer.input_shape == (320000,)
    head = next(op for op in conformer.ops if op.name == "lm_head")
    assert head.n == 32
