"""Pipeline blocks of a Transformers model: a hybrid's layer list of several layer classes is
split as one of a single class is; a list mixing torch's own modules is not a layer list; a
staged model's stages are each split, whether a stage list lies inside the counted list (Swin)
or beside it (SwiftFormer)."""

from __future__ import annotations

from typing import Any

from torch import nn

from ipu_tune.models._hf_blocks import layer_lists

# A Jamba of four layers: attention in layers 1 and 3 (JambaAttentionDecoderLayer), Mamba in
# 0 and 2 (JambaMambaDecoderLayer); experts in the odd layers.
SMALL_JAMBA = {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128,
               "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4,
               "vocab_size": 1000, "attn_layer_period": 2, "attn_layer_offset": 1,
               "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_d_state": 8}


def test_a_hybrids_layers_of_two_classes_are_its_blocks(profile_of: Any) -> None:
    profile = profile_of(name="hf", hf={"model_type": "jamba", "config": SMALL_JAMBA},
                         sequence_length=32)
    assert profile.blocks == ["model.embed_tokens", *(f"model.layers.{i}" for i in range(4))]
    work = {b.name: b.forward_flops for b in profile.block_stats}
    assert all(work[f"model.layers.{i}"] > 0 for i in range(4))


class _Layer(nn.Module):
    """A model's own layer class (not torch's)."""


class _OtherLayer(nn.Module):
    """A second one, as a hybrid has."""


class _Config:
    num_hidden_layers = 2

    def to_dict(self) -> dict[str, Any]:
        return {"num_hidden_layers": self.num_hidden_layers}


def test_a_counted_list_mixing_torch_modules_is_no_layer_list() -> None:
    model = nn.Module()
    model.stem = nn.ModuleList([nn.Conv2d(1, 1, 1), nn.ReLU()])  # parts of one layer
    model.layers = nn.ModuleList([_Layer(), _OtherLayer()])
    assert layer_lists(model, _Config()) == ["layers"]


def test_each_stage_of_a_staged_model_is_split(profile_of: Any) -> None:
    # SwiftFormer's stages are separate lists between downsampling layers; the last one's
    # length equals the number of stages, which alone used to make it the only layer list.
    profile = profile_of(name="hf", hf={"model_type": "swiftformer",
                                        "config": {"depths": [2, 2, 3, 4]}})
    stages = [f"swiftformer.encoder.network.{2 * s}.blocks" for s in range(4)]
    assert profile.blocks == [f"{stage}.{i}" for stage, n in zip(stages, [2, 2, 3, 4], strict=True)
                              for i in range(n)]


class _Staged:
    depths = (2, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"depths": list(self.depths)}


def test_stage_lists_inside_the_counted_list_keep_it() -> None:
    # Swin: `layers` (one entry per stage) holds each stage's `blocks`; the stage list is split
    # by its inner layers, as before.
    model = nn.Module()
    stages = [nn.Module(), nn.Module()]
    for stage, n in zip(stages, _Staged.depths, strict=True):
        stage.blocks = nn.ModuleList([_Layer() for _ in range(n)])
    model.layers = nn.ModuleList(stages)
    assert layer_lists(model, _Staged()) == ["layers"]
