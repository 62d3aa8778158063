"""Transformers models that read a tensor's value or need a config default filled: they profile
on the meta device, with Transformers' own parameter count and the FLOPs of a real run."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch
import transformers
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from ipu_tune.models._trace import BATCH, trace_model

SEQ = 32


def _model(model_type: str, task: str, config: dict[str, Any], device: str) -> nn.Module:
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    cfg._attn_implementation = "eager"  # as the profiler builds it
    with torch.device(device):
        model: nn.Module = getattr(transformers, task).from_config(cfg)
    return model


def _real_flops(model: nn.Module, call: Any, ids: Tensor) -> float:
    """Forward and backward FLOPs per sample of a CPU run on `ids` with the profile's loss."""
    model.train()
    with FlopCounterMode(display=False) as counter:
        logits = call(model, ids).logits
        target = torch.zeros(logits.shape[:-1], dtype=torch.long)
        nn.functional.cross_entropy(logits.flatten(0, -2), target.flatten()).backward()
    return counter.get_total_flops() / len(ids)


def _seq2seq(model: nn.Module, ids: Tensor) -> Any:
    return model(input_ids=ids, decoder_input_ids=ids, use_cache=False)


def _encoder(model: nn.Module, ids: Tensor) -> Any:
    return model(input_ids=ids)


# Models that test a whole tensor's value: FSMT skips the padding mask of an unpadded batch
# (`padding_mask.any()`), Longformer and LED run global attention only if a token asks for it.
TESTED_VALUES = [
    ("fsmt", "AutoModelForSeq2SeqLM", _seq2seq,
     {"encoder_layers": 1, "decoder_layers": 1, "d_model": 32, "encoder_attention_heads": 2,
      "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
      "src_vocab_size": 100, "tgt_vocab_size": 100}),
    ("longformer", "AutoModelForMaskedLM", _encoder,
     {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
      "intermediate_size": 64, "vocab_size": 100, "attention_window": 16}),
    # Models that compute with a value run their step on the CPU (`_cpu_step`): XLM and
    # FlauBERT slice to their longest sequence (`lengths.max().item()`), I-BERT reads a scale,
    # Switch Transformers route tokens to experts (`nonzero`; the same seed, the same routing).
    ("xlm", "AutoModelForMaskedLM", _encoder,
     {"n_layers": 1, "emb_dim": 32, "n_heads": 2, "vocab_size": 100}),
    ("flaubert", "AutoModelForMaskedLM", _encoder,
     {"n_layers": 1, "emb_dim": 32, "n_heads": 2, "vocab_size": 100}),
    ("ibert", "AutoModelForMaskedLM", _encoder,
     {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
      "intermediate_size": 64, "vocab_size": 100}),
    ("switch_transformers", "AutoModelForSeq2SeqLM", _seq2seq,
     {"num_layers": 2, "num_decoder_layers": 2, "d_model": 32, "d_ff": 64, "d_kv": 16,
      "num_heads": 2, "num_experts": 4, "vocab_size": 100, "encoder_sparse_step": 1,
      "decoder_sparse_step": 1}),
]


@pytest.mark.parametrize(("model_type", "task", "call", "config"), TESTED_VALUES,
                         ids=[c[0] for c in TESTED_VALUES])
def test_a_model_testing_a_tensors_value_profiles_as_its_usual_input_runs(
    profile_of: Any, model_type: str, task: str, call: Any, config: dict[str, Any]
) -> None:
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config},
                         sequence_length=SEQ)
    assert profile.parameters == _model(model_type, task, config, "meta").num_parameters()
    # The FLOPs of a real run on tokens that are neither padding nor special.
    torch.manual_seed(0)
    ids = torch.full((BATCH, SEQ), 7, dtype=torch.long)
    real = _real_flops(_model(model_type, task, config, "cpu"), call, ids)
    assert profile.forward_flops + profile.backward_flops == real > 0


class _Guarded(nn.Module):
    """Tests its input as models do: a check that passes, a skip that is not taken."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        if not torch.isfinite(x).all():
            raise ValueError("not finite")
        torch._check_tensor_all(x == x)
        if (x > 1e4).any():
            x = x.clamp(max=1e4)
        return self.fc(x)


class _ReadsValue(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x[: int(x.sum().item())])


def test_all_and_any_answer_as_on_the_usual_input_and_other_values_stay_unread() -> None:
    example = torch.empty(BATCH, 8, device="meta")
    with torch.device("meta"):
        guarded, reads = _Guarded(), _ReadsValue()
    trace = trace_model(guarded, example)
    assert sum(r.forward_flops for r in trace.records) == 2 * BATCH * 8 * 4
    assert not any("clamp" in r.name for r in trace.records)  # the skip is not taken
    with pytest.raises(RuntimeError, match="meta"):
        trace_model(reads, example)


SMALL_DECODER = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                 "intermediate_size": 128, "vocab_size": 1000}


@pytest.mark.parametrize(("model_type", "unset", "filled"), [
    ("ministral", {"num_key_value_heads": 2}, {"head_dim": 16}),  # head_dim defaults to None
    ("hunyuan_v1_dense", {"num_key_value_heads": 2}, {"head_dim": 16}),
    ("nemotron", {}, {"num_key_value_heads": 4}),  # num_key_value_heads defaults to None
])
def test_a_size_a_config_leaves_unset_takes_its_conventional_value(
    profile_of: Any, model_type: str, unset: dict[str, int], filled: dict[str, int]
) -> None:
    config = {**SMALL_DECODER, **unset}
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config},
                         sequence_length=SEQ)
    stated = _model(model_type, "AutoModelForCausalLM", {**config, **filled}, "meta")
    assert profile.parameters == stated.num_parameters() > 0
    assert profile.forward_flops > 0
    # A size the user gives is kept.
    wider = {**SMALL_DECODER, "head_dim": 32, "num_key_value_heads": 2}
    given = profile_of(name="hf", hf={"model_type": model_type, "config": wider},
                       sequence_length=SEQ)
    assert given.parameters == _model(model_type, "AutoModelForCausalLM", wider,
                                      "meta").num_parameters() != profile.parameters


# timm's resnet50 with DETR's feature maps, as Transformers' own ResNet.
RESNET50 = {"model_type": "resnet", "layer_type": "bottleneck", "depths": [3, 4, 6, 3],
            "out_features": ["stage1", "stage2", "stage3", "stage4"]}


def test_detr_without_timm_builds_transformers_resnet_of_the_same_depth(profile_of: Any) -> None:
    if importlib.util.find_spec("timm") is not None:
        pytest.skip("timm is installed: DETR builds its own timm backbone")
    config = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 32, "num_queries": 10,
              "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}
    profile = profile_of(name="hf", hf={"model_type": "detr", "config": config})
    same = _model("detr", "AutoModel", {**config, "backbone_config": RESNET50}, "meta")
    assert profile.parameters == same.num_parameters()
    # That backbone is ResNet-50 without its classifier: 25,557,032 - 2048 x 1000 - 1000.
    with torch.device("meta"):
        alone = transformers.ResNetBackbone(transformers.ResNetConfig(**{
            k: v for k, v in RESNET50.items() if k != "model_type"}))
    assert sum(p.numel() for p in alone.parameters()) == 23_508_032
    assert profile.forward_flops > 0


DEFORMABLE = {"encoder_layers": 1, "decoder_layers": 1, "d_model": 32, "num_queries": 10,
              "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "encoder_n_points": 2,
              "decoder_n_points": 2}


def test_a_weight_made_off_the_meta_device_and_held_by_the_model_itself_is_counted(
    profile_of: Any
) -> None:
    # Deformable DETR's level embeddings: torch.Tensor(levels, d) on the CPU whatever the
    # device, a parameter of the base model itself rather than of a child.
    config = DEFORMABLE
    profile = profile_of(name="hf", hf={"model_type": "deformable_detr", "config": config})
    backbone = {**RESNET50, "out_features": ["stage2", "stage3", "stage4"]}
    model = _model("deformable_detr", "AutoModel", {**config, "backbone_config": backbone},
                   "meta")
    assert profile.parameters == sum(p.numel() for p in model.parameters())
    assert profile.forward_flops > 0


def test_a_cpu_tensor_the_model_makes_joins_the_meta_device(profile_of: Any) -> None:
    # XLNet builds its attention mask on the CPU; the profile equals a real run's FLOPs.
    config = {"n_layer": 1, "d_model": 32, "n_head": 2, "d_inner": 64, "vocab_size": 100}
    profile = profile_of(name="hf", hf={"model_type": "xlnet", "config": config},
                         sequence_length=SEQ)
    assert profile.parameters == _model("xlnet", "AutoModelForCausalLM", config,
                                        "meta").num_parameters()
    ids = torch.full((BATCH, SEQ), 7, dtype=torch.long)
    real = _real_flops(_model("xlnet", "AutoModelForCausalLM", config, "cpu"), _causal, ids)
    assert profile.forward_flops + profile.backward_flops == real > 0


def _causal(model: nn.Module, ids: Tensor) -> Any:
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)


class _CpuScalar(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x).masked_fill(x[:, :4] > 0, torch.tensor(-1.0))


def test_an_op_mixing_a_cpu_scalar_with_meta_tensors_runs_on_meta() -> None:
    with torch.device("meta"):
        model = _CpuScalar()
    trace = trace_model(model, torch.empty(BATCH, 8, device="meta"))
    assert sum(r.forward_flops for r in trace.records) == 2 * BATCH * 8 * 4


def test_experts_a_model_loops_over_eagerly_run_as_grouped_matmuls(profile_of: Any) -> None:
    # OpenAI's privacy filter chooses Transformers' eager experts loop, which visits the experts
    # the routing hit (a count of values): as grouped matmuls, the same FLOPs as a real run.
    config = {"num_hidden_layers": 1, "num_local_experts": 8, "vocab_size": 1000,
              "pad_token_id": 0, "eos_token_id": 0, "hidden_size": 64, "intermediate_size": 64,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
    profile = profile_of(name="hf", hf={"model_type": "openai_privacy_filter", "config": config},
                         sequence_length=SEQ)
    assert profile.parameters == _model("openai_privacy_filter", "AutoModel", config,
                                        "meta").num_parameters()
    ids = torch.full((BATCH, SEQ), 7, dtype=torch.long)
    model = _model("openai_privacy_filter", "AutoModel", config, "cpu")
    model.train()
    with FlopCounterMode(display=False) as counter:
        features = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state
        target = torch.zeros(features.shape[:-1], dtype=torch.long)
        nn.functional.cross_entropy(features.flatten(0, -2), target.flatten()).backward()
    assert profile.forward_flops + profile.backward_flops == counter.get_total_flops() / BATCH


def test_a_config_of_per_layer_sizes_is_left_as_it_is() -> None:
    from ipu_tune.models._hf_defaults import fill_derived_sizes

    config = transformers.AutoConfig.for_model("dots3_note_text")
    before = config.to_dict()
    fill_derived_sizes(config)  # its heads are per layer: no global size to derive from
    assert config.to_dict() == before


def test_a_base_models_stand_in_loss_is_on_its_features_not_its_first_tensor(
    profile_of: Any
) -> None:
    # Deformable DETR's output begins with its initial reference points; its features, the
    # decoder's last hidden state, reach the whole model: backward FLOPs equal a real run's.
    config = {**DEFORMABLE, "backbone_config": {**RESNET50, "out_features": ["stage3", "stage4"]}}
    profile = profile_of(name="hf", hf={"model_type": "deformable_detr", "config": config})
    model = _model("deformable_detr", "AutoModel", config, "cpu")
    model.train()
    with FlopCounterMode(display=False) as counter:
        pixels = torch.randn(BATCH, *profile.input_shape)  # 224 x 224: no image size stated
        features = model(pixel_values=pixels).last_hidden_state
        target = torch.zeros(features.shape[:-1], dtype=torch.long)
        nn.functional.cross_entropy(features.flatten(0, -2), target.flatten()).backward()
    assert profile.forward_flops + profile.backward_flops == counter.get_total_flops() / BATCH
