"""The exports of an audio model: float inputs in the plan's precision, the CTC and
speech-seq2seq losses, optimum-graphcore's layer count and pipeline task, the data lines."""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest
import torch

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig, PipelineConfig, PlanConfig
from ipu_tune.exports import render_ipu_config, render_run_with_optimum
from ipu_tune.models import profile_model
from ipu_tune.plan import ExecutionPlan

from ._recorder import Log, install, poptorch_model, run_source
from ._render import poptorch_snippet

PLAN = ExecutionPlan(micro_batch_size=2, precision="16.16", gradient_accumulation=16,
                     device_iterations=4)
# A wav2vec2 small enough to run on the CPU: 2 convs, 2 encoder layers.
TINY_WAV2VEC2 = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
                 "intermediate_size": 64, "conv_dim": [8, 8], "conv_kernel": [10, 3],
                 "conv_stride": [5, 2], "num_feat_extract_layers": 2,
                 "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2}


def _cfg(hf: HfConfig, splits: list[str], seq: int | None = None,
         precision: str = "16.16") -> EvalConfig:
    return EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=seq),
                      plan=PlanConfig(precision=precision, gradient_accumulation=8,
                                      pipeline=PipelineConfig(splits=splits)))


def test_wav2vec2_ipu_config_counts_its_front_end_and_head_as_optimum_does() -> None:
    """PipelinedWav2Vec2ForCTC.parallelize() places 7 convs, the positional conv embedding,
    12 encoder layers and lm_head: layers_per_ipu must add up to 21."""
    profile = profile_model(ModelConfig(name="hf", hf=HfConfig(model_type="wav2vec2")))
    plan = replace(PLAN, splits=("wav2vec2.encoder.layers.4",))
    data = json.loads(render_ipu_config(plan, profile, EvalConfig()))
    assert data["layers_per_ipu"] == [7 + 1 + 4, 8 + 1] and data["ipus_per_replica"] == 2


def test_whisper_ipu_config_counts_encoder_and_decoder_layers() -> None:
    profile = profile_model(ModelConfig(name="hf", hf=HfConfig(model_type="whisper")))
    plan = replace(PLAN, splits=("model.decoder.layers.0",))
    data = json.loads(render_ipu_config(plan, profile, EvalConfig()))
    assert data["layers_per_ipu"] == [4, 4]


@pytest.mark.parametrize(("model_type", "auto", "sample"), [
    ("wav2vec2", "AutoModelForCTC", "{model.main_input_name: torch.randn(320000), "
     "'labels': torch.randint(1, config.vocab_size, (320,))}"),
    ("whisper", "AutoModelForSpeechSeq2Seq", "{model.main_input_name: torch.randn(80, 3000), "
     "'labels': torch.randint(config.vocab_size, (128,))}"),
])
def test_run_with_optimum_trains_and_transcribes_speech(
    model_type: str, auto: str, sample: str
) -> None:
    cfg = _cfg(HfConfig(model_type=model_type), [])
    profile = profile_model(cfg.model)
    train = render_run_with_optimum(PLAN, profile, cfg)
    compile(train, "run_with_optimum.py", "exec")
    assert f"from transformers import AutoConfig, {auto}" in train
    assert f"def __getitem__(self, i): return {sample}" in train
    infer = render_run_with_optimum(replace(PLAN, mode="infer", gradient_accumulation=1),
                                    profile, cfg)
    compile(infer, "run_with_optimum.py", "exec")
    # The plan's batch on one compiled forward pass (not optimum's pipeline, fed one sample):
    # the audio, and a speech-seq2seq model's decoder tokens as profiled.
    assert "poptorch.inferenceModel(model.eval(), opts)" in infer
    assert "**{model.main_input_name: torch.randn(BATCH, " in infer
    assert ("decoder_input_ids=torch.randint(config.vocab_size, (BATCH, 128))" in infer) == (
        model_type == "whisper")


def test_poptorch_program_streams_audio_in_the_plans_precision() -> None:
    for precision, dtype in (("16.16", "torch.float16"), ("32.32", "torch.float32")):
        cfg = _cfg(HfConfig(model_type="whisper"), ["model.decoder.layers.0"],
                   precision=precision)
        source = poptorch_snippet(cfg, None, profile_model(cfg.model))
        ast.parse(source)
        assert f"INPUT_DTYPE = {dtype}" in source
        assert "AutoModelForSpeechSeq2Seq.from_config(" in source
        assert f"features of shape [80, 3000] as {dtype}, with 128 label tokens" in source
        assert "out = self.model(x, labels=labels)" in source
        assert "model.model.decoder.layers[0] = poptorch.BeginBlock(" in source


def test_ctc_program_trains_a_real_wav2vec2_under_ctc_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The program's ModelWithLoss on Transformers' own Wav2Vec2ForCTC (a tiny one, on the CPU;
    poptorch recorded): a finite CTC loss over the frames, with gradients to the head."""
    cfg = _cfg(HfConfig(model_type="wav2vec2", config=TINY_WAV2VEC2),
               ["wav2vec2.encoder.layers.1"], seq=1600, precision="32.32")
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    assert "torch.nn.CTCLoss(zero_infinity=True)" in source
    assert "INPUT_DTYPE = torch.float32" in source
    model = poptorch_model(monkeypatch, source)
    audio = torch.randn(3, 1600)
    labels = torch.randint(1, 32, (3, 20))
    out, loss = model(audio, labels)
    assert out.shape == (3, 159, 32) and torch.isfinite(loss)  # 1600 samples: 159 frames
    loss.backward()
    assert model.model.lm_head.weight.grad is not None


# A Whisper small enough to run on the CPU: 8 mel bins, 32 frames, one layer each side.
TINY_WHISPER = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
                "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "num_mel_bins": 8,
                "max_source_positions": 16, "max_target_positions": 16, "vocab_size": 100,
                "pad_token_id": 1, "bos_token_id": 2, "eos_token_id": 3,
                "decoder_start_token_id": 2}


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_an_overlapped_whisper_program_takes_its_decoder_tokens(
    monkeypatch: pytest.MonkeyPatch, mode: str,
) -> None:
    """With I/O tiles the input wrapper overlaps the features' stream; the decoder's tokens
    (labels to train, decoder_input_ids to infer) pass through it to Transformers' model."""
    cfg = _cfg(HfConfig(model_type="whisper", config=TINY_WHISPER), [], precision="32.32")
    cfg = replace(cfg, workload=replace(cfg.workload, mode=mode, micro_batch_size=2),
                  plan=replace(cfg.plan, io_tiles=32, gradient_accumulation=1))
    source = poptorch_snippet(cfg, None, profile_model(cfg.model))
    assert "poptorch.OverlapMode.OverlapDeviceIterationLoop" in source
    log = Log()
    install(monkeypatch, log, "poptorch", "popdist.poptorch")
    log.returns["poptorch.set_overlap_for_input"] = lambda tensor, _mode: tensor
    model = run_source(source, "poptorch_options.py")["model"]
    features = torch.randn(2, 8, 32)
    tokens = torch.randint(0, 100, (2, 16))
    if mode == "train":
        out, loss = model(features, tokens)
        assert torch.isfinite(loss)
    else:
        assert "decoder input tokens" in source and "decoder_input_ids=ids" in source
        out = model(features, decoder_input_ids=tokens)
    assert out.logits.shape == (2, 16, 100) if mode == "infer" else out.shape == (2, 16, 100)
