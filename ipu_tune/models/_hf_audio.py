"""Audio models of Transformers (speech recognition, audio classification): their one input, its
shape, the call the profiler runs and their pipeline blocks.

A model's `main_input_name` says what it reads:
- `input_values`, a waveform (wav2vec2, HuBERT, WavLM, Data2VecAudio): one sample is `(samples,)`,
  by default 20 s at 16 kHz, the default longest clip of Transformers' own example scripts
  (`examples/pytorch/speech-recognition/run_speech_recognition_ctc.py` and
  `run_speech_recognition_seq2seq.py`: `max_duration_in_seconds=20.0`;
  `examples/pytorch/audio-classification/run_audio_classification.py`:
  `max_length_seconds=20`), at the 16 kHz these models' feature extractors take;
  `model.sequence_length` sets the samples. The Audio Spectrogram Transformer reads
  `input_values` too, as a spectrogram of the config's `(max_length, num_mel_bins)`.
- `input_features`, log-mel features: Whisper's `(num_mel_bins, 2 x max_source_positions)` (its
  encoder takes exactly 3000 frames, 30 s), Speech2Text's `(frames, input_feat_per_channel x
  input_channels)` at its extractor's 10 ms hop, 2000 frames for the same 20 s.
A speech-seq2seq model also reads decoder token ids: `model.sequence_length` of them (its
encoder input is fixed above), default 128 or the config's `max_target_positions` if smaller.

Training as the example scripts and optimum-graphcore do: a CTC or classification head's
convolutional feature encoder is frozen (`freeze_feature_encoder`, the scripts' default, and
`PipelinedWav2Vec2ForCTC.parallelize()`), so it has no backward pass. SpecAugment's masking
(`apply_spec_augment`) and LayerDrop are left out: the first writes masked frames by a mask's
values, which the meta device has not (an elementwise select), the second skips whole layers at
random, and a step must hold every layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from ipu_tune.config import ModelConfig
from ipu_tune.errors import bad_value
from ipu_tune.models._hf_runner import AS_FACTORY, HfRunner

__all__ = ["DEFAULT_SAMPLES", "audio_model"]

# 20 s (the example scripts' default longest clip, module docstring) at 16 kHz.
SAMPLING_RATE = 16_000
CLIP_SECONDS = 20
DEFAULT_SAMPLES = CLIP_SECONDS * SAMPLING_RATE
# Speech2Text's filter banks: one frame per 10 ms (Speech2TextFeatureExtractor, Kaldi's shift).
FRAMES_PER_SECOND = 100
# Decoder tokens of a speech-seq2seq model: the token models' default length, well above a
# 20 s transcript (about 50 words at speaking rate, 70 tokens).
DEFAULT_DECODER_TOKENS = 128
_SEQ = "model.sequence_length"


def _front_end(model: nn.Module, first_list: str) -> str:
    """The module that begins the model, before its first layer list: from the root, the first
    child of the deepest module holding that list with children before it (wav2vec2's
    `wav2vec2.feature_extractor`, Whisper's `model.encoder.conv1`)."""
    path, front = "", ""
    for part in first_list.split("."):
        module = model.get_submodule(path) if path else model
        names = [n for n, _ in module.named_children()]
        if not front and part in names and names.index(part) > 0:
            front = f"{path}.{names[0]}" if path else names[0]
        path = f"{path}.{part}" if path else part
    return front or first_list


def _blocks(model: nn.Module, lists: list[str]) -> list[Any]:
    """The front end, then each layer; a later list's first layer begins at its parent's first
    child (the decoder's token and position embeddings), as optimum-graphcore's Whisper puts
    them on the IPU of decoder layer 0."""
    if not lists:
        return []
    out: list[Any] = [_front_end(model, lists[0])]
    for n, path in enumerate(lists):
        parent = path.rpartition(".")[0]
        first = next(iter(model.get_submodule(parent).named_children()))[0] if parent else ""
        for i in range(len(list(model.get_submodule(path).children()))):
            name = f"{path}.{i}"
            begins = f"{parent}.{first}" if n > 0 and i == 0 and parent else name
            out.append(name if begins == name else (name, begins))
    return out


def _receptive_field(config: Any) -> int:
    """Samples the convolutional feature encoder needs for one frame (wav2vec2: 400)."""
    kernels, strides = getattr(config, "conv_kernel", None), getattr(config, "conv_stride", None)
    if not kernels or not strides:
        return 1
    field, jump = 1, 1
    for k, s in zip(kernels, strides, strict=False):
        field, jump = field + (int(k) - 1) * jump, jump * int(s)
    return field


def _input_shape(cfg: ModelConfig, config: Any, main: str, task: str) -> tuple[int, ...]:
    """One sample's input (module docstring); `model.sequence_length` checked where it counts
    samples or frames."""
    kind = config.model_type
    if main == "input_values" and getattr(config, "num_mel_bins", None) is None:
        samples = cfg.sequence_length or DEFAULT_SAMPLES
        least = _receptive_field(config)
        if samples < least:
            raise bad_value(_SEQ, samples, f"at least {least} samples, one frame of {kind}'s "
                            "convolutional feature encoder (its conv_kernel and conv_stride)")
        return (samples,)
    if main == "input_values" and isinstance(getattr(config, "max_length", None), int):
        frames, bins = int(config.max_length), int(config.num_mel_bins)
        if cfg.sequence_length not in (None, frames):
            raise bad_value(_SEQ, cfg.sequence_length, f"unset or {frames}: {kind} reads "
                            f"max_length={frames} frames; set model.hf.config.max_length")
        return (frames, bins)
    if main == "input_features" and getattr(config, "input_feat_per_channel", None):
        features = int(config.input_feat_per_channel) * int(getattr(config, "input_channels", 1))
        return (CLIP_SECONDS * FRAMES_PER_SECOND, features)
    if main == "input_features" and getattr(config, "num_mel_bins", None):
        return (int(config.num_mel_bins), 2 * int(config.max_source_positions))
    raise bad_value("model.hf.task", task, f"an audio model ipu-tune can feed (a waveform's "
                    f"input_values; Whisper's or Speech2Text's input_features); {kind} reads "
                    f"{main or 'no main input'}: {AS_FACTORY}")  # fmt: skip


def _decoder_tokens(cfg: ModelConfig, config: Any, main: str) -> int:
    """Decoder ids of a speech-seq2seq model: `model.sequence_length` for a model of fixed
    features (a waveform model's length is its samples), at most `max_target_positions`."""
    limit = getattr(config, "max_target_positions", None)
    limit = limit if isinstance(limit, int) and limit > 0 else None
    given = cfg.sequence_length if main == "input_features" else None
    if given is None:
        return min(DEFAULT_DECODER_TOKENS, limit or DEFAULT_DECODER_TOKENS)
    if limit is not None and given > limit:
        raise bad_value(_SEQ, given, f"at most {limit} decoder tokens (max_target_positions of "
                        f"{config.model_type}'s config): {_SEQ} sets a speech-seq2seq model's "
                        "decoder tokens; raise model.hf.config.max_target_positions")
    return given


def _call(main: str, decoder: int) -> Callable[[nn.Module, Tensor], Any]:
    def call(model: nn.Module, x: Tensor) -> Any:
        if not decoder:
            return model(**{main: x})
        ids = torch.zeros(x.shape[0], decoder, dtype=torch.long, device=x.device)
        return model(**{main: x}, decoder_input_ids=ids, use_cache=False)

    return call


def _train_as_scripts(model: nn.Module, task: str) -> None:
    """Freeze the feature encoder of a CTC or classification head; no SpecAugment, no LayerDrop
    (module docstring). The config's own fields change on the built model only."""
    if task != "speech-seq2seq" and callable(getattr(model, "freeze_feature_encoder", None)):
        model.freeze_feature_encoder()  # type: ignore[operator]
    config: Any = model.config
    # Models that mask read this flag, with True when the config has none (Data2VecAudio).
    if hasattr(config, "mask_time_prob") or hasattr(config, "apply_spec_augment"):
        config.apply_spec_augment = False
    for key in ("layerdrop", "encoder_layerdrop", "decoder_layerdrop"):
        if isinstance(getattr(config, key, None), float):
            setattr(config, key, 0.0)


def audio_model(cfg: ModelConfig, config: Any, model: nn.Module, lists: list[str],
                task: str) -> tuple[HfRunner, str, tuple[int, ...]]:
    """(runner, "audio", one sample's shape) of a built audio model; the runner's
    `paired_tokens` is a speech-seq2seq model's decoder tokens."""
    main = str(getattr(model, "main_input_name", ""))
    shape = _input_shape(cfg, config, main, task)
    decoder = _decoder_tokens(cfg, config, main) if task == "speech-seq2seq" else 0
    _train_as_scripts(model, task)
    blocks = _blocks(model, lists)
    head = _tied_output(model)
    # A tied output projection (Whisper's proj_out) runs where optimum-graphcore puts the
    # decoder's embeddings: with decoder layer 0.
    head_block = next((b[0] for b in blocks[1:] if isinstance(b, tuple)), None)
    runner = HfRunner(model, _call(main, decoder), blocks, head if head_block else None)
    runner.head_block = head_block
    runner.paired_tokens = decoder
    return runner, "audio", shape


def _tied_output(model: nn.Module) -> str | None:
    """Top-level module of an output projection tied to the input embeddings, else None."""
    try:
        out = model.get_output_embeddings()  # type: ignore[operator]
        inp = model.get_input_embeddings()  # type: ignore[operator]
    except NotImplementedError:  # wav2vec2 and its kin have no token embedding
        return None
    if out is None or inp is None or getattr(out, "weight", None) is not getattr(inp, "weight", 0):
        return None
    name = next((n for n, m in model.named_modules() if m is out), None)
    return name.split(".", 1)[0] if name else None
