"""The pixels a Transformers vision model is profiled on are the shape its config states: a
[height, width] image size, a video model's frames first."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from ipu_tune.models._trace import BATCH

TINY = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64}
TINY_VIT = {**TINY, "patch_size": 16}
PIXELS = [
    # VideoMAE and ViViT take pixel_values as (batch, frames, channels, height, width).
    ("videomae", {**TINY_VIT, "num_frames": 4, "image_size": 32, "tubelet_size": 2},
     (4, 3, 32, 32)),
    ("vivit", {**TINY, "num_frames": 4, "image_size": 32, "tubelet_size": [2, 16, 16]},
     (4, 3, 32, 32)),
    ("timesformer", {**TINY_VIT, "num_frames": 2, "image_size": 32}, (2, 3, 32, 32)),
    # A [height, width] image size (YOLOS's default is 512 x 864).
    ("yolos", {**TINY_VIT, "image_size": [32, 64], "num_detection_tokens": 4}, (3, 32, 64)),
]


def _real_flops(model_type: str, config: dict[str, Any], shape: tuple[int, ...]) -> float:
    """Forward and backward FLOPs per sample of the base model on the CPU, under the
    profile's stand-in loss (the sum of its features)."""
    with torch.device("cpu"):
        model = transformers.AutoModel.from_config(
            transformers.AutoConfig.for_model(model_type, **config),
            attn_implementation="eager")
    model.train()
    with FlopCounterMode(display=False) as counter:
        out = model(pixel_values=torch.randn(BATCH, *shape)).last_hidden_state
        out.float().sum().backward()
    return counter.get_total_flops() / BATCH


@pytest.mark.parametrize(("model_type", "config", "shape"), PIXELS, ids=[p[0] for p in PIXELS])
def test_pixels_take_the_configs_frames_and_sides(
    profile_of: Any, model_type: str, config: dict[str, Any], shape: tuple[int, ...]
) -> None:
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config})
    assert profile.input_kind == "image" and tuple(profile.input_shape) == shape
    assert profile.forward_flops + profile.backward_flops == _real_flops(
        model_type, config, shape) > 0


TOWER = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
         "intermediate_size": 64}
PAIRS = [
    # CLIP's two towers, asked for by their base model (its usual head is the image tower's
    # classifier), and BLIP's: pixels streamed, each with a caption of the text tower's length.
    ("clip", {"text_config": {**TOWER, "vocab_size": 100, "max_position_embeddings": 16},
              "vision_config": {**TOWER, "image_size": 32, "patch_size": 16},
              "projection_dim": 16}, 16),
    ("blip", {"text_config": {**TOWER, "vocab_size": 100, "max_position_embeddings": 24},
              "vision_config": {**TOWER, "image_size": 32, "patch_size": 16},
              "projection_dim": 16}, 24),
]


@pytest.mark.parametrize(("model_type", "config", "tokens"), PAIRS, ids=[p[0] for p in PAIRS])
def test_an_image_text_model_runs_both_towers_on_pixels_and_captions(
    profile_of: Any, model_type: str, config: dict[str, Any], tokens: int
) -> None:
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config,
                                        "task": "feature-extraction"})
    assert profile.input_kind == "image" and tuple(profile.input_shape) == (3, 32, 32)
    assert profile.paired_tokens == tokens
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    with torch.device("cpu"):
        model = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    assert profile.parameters == model.num_parameters()
    model.train()
    ids = torch.full((BATCH, tokens), 5)
    with FlopCounterMode(display=False) as counter:
        logits = model(input_ids=ids, pixel_values=torch.randn(BATCH, 3, 32, 32),
                       attention_mask=torch.ones_like(ids)).logits_per_image
        both_sides = torch.cat((logits, logits.t()))  # CLIP's symmetric loss
        torch.nn.functional.cross_entropy(both_sides, torch.arange(BATCH).repeat(2)).backward()
    assert profile.forward_flops + profile.backward_flops == counter.get_total_flops() / BATCH
