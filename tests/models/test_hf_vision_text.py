"""Vision-language models that put their image features into the text (LLaVA, PaliGemma):
pixels in, each with token ids whose first places are the image's; both towers and the
language model profiled as Transformers runs them on the CPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from ipu_tune.errors import IpuTuneError
from ipu_tune.models._hf_names import usual_task
from ipu_tune.models._trace import BATCH

TEXT = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000}
VISION = {"num_hidden_layers": 3, "hidden_size": 32, "intermediate_size": 64,
          "num_attention_heads": 2, "image_size": 64, "patch_size": 16}
# (model type, its config, the image tokens one 64 x 64 image takes: 16 patches of 16 x 16;
# LLaVA drops the vision tower's class token, PaliGemma's SigLIP has none).
MODELS = [
    ("llava", {"text_config": TEXT, "vision_config": VISION, "image_token_id": 999}, 16),
    ("paligemma", {"text_config": {**TEXT, "head_dim": 16}, "image_token_id": 999,
                   "vision_config": {**VISION, "num_image_tokens": 16}, "projection_dim": 64},
     16),
]


def _cpu_step(model_type: str, config: dict[str, Any], image_tokens: int,
              tokens: int) -> tuple[int, float]:
    """Parameters and forward + backward FLOPs per sample of Transformers' own model on the
    CPU: the image's places first in the ids, then text; cross-entropy on the logits."""
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    with torch.device("cpu"):
        model = transformers.AutoModelForImageTextToText.from_config(
            cfg, attn_implementation="eager")
    model.train()
    ids = torch.full((BATCH, tokens), 5)
    ids[:, :image_tokens] = cfg.image_token_id
    with FlopCounterMode(display=False) as counter:
        logits = model(input_ids=ids, pixel_values=torch.randn(BATCH, 3, 64, 64),
                       attention_mask=torch.ones_like(ids), use_cache=False).logits
        torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), torch.zeros(logits.shape[:-1].numel(),
                                                              dtype=torch.long)).backward()
    return model.num_parameters(), counter.get_total_flops() / BATCH


@pytest.mark.parametrize(("model_type", "config", "image_tokens"), MODELS,
                         ids=[m[0] for m in MODELS])
def test_a_vision_language_model_profiles_as_transformers_runs_it(
    profile_of: Any, model_type: str, config: dict[str, Any], image_tokens: int,
) -> None:
    assert usual_task(model_type) == "image-text-to-text"
    profile = profile_of(name="hf", hf={"model_type": model_type, "config": config})
    assert profile.input_kind == "image" and tuple(profile.input_shape) == (3, 64, 64)
    # The image's places and 128 text tokens stream beside the pixels.
    assert profile.paired_tokens == image_tokens + 128
    parameters, flops = _cpu_step(model_type, config, image_tokens, profile.paired_tokens)
    assert profile.parameters == parameters
    assert profile.forward_flops + profile.backward_flops == flops
    # Both towers' layers are pipeline blocks, the vision tower's first, as they run.
    names = [b.name for b in profile.block_stats]
    vision = [n for n in names if "vision" in n and ".layers." in n]
    language = [n for n in names if "language_model.layers." in n]
    assert len(vision) == 3 and len(language) == 2
    assert names.index(vision[-1]) < names.index(language[0])


def test_the_sequence_length_counts_the_image_places_and_must_exceed_them(
    profile_of: Any,
) -> None:
    llava = {"model_type": "llava", "config": MODELS[0][1]}
    assert profile_of(name="hf", hf=llava, sequence_length=48).paired_tokens == 48
    with pytest.raises(IpuTuneError, match=r"model.sequence_length=16: more than the image's "
                       r"16 tokens"):
        profile_of(name="hf", hf=llava, sequence_length=16)


def test_a_saved_vision_language_config_builds_its_head(profile_of: Any,
                                                        tmp_path: Path) -> None:
    # A downloaded config.json names LlavaForConditionalGeneration: the vision-language
    # head, not an encoder-decoder's seq2seq head.
    config = transformers.AutoConfig.for_model("llava", **MODELS[0][1]).to_dict()
    config["architectures"] = ["LlavaForConditionalGeneration"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    profile = profile_of(name="hf", hf={"config_file": str(path)})
    assert profile.input_kind == "image" and profile.paired_tokens == 16 + 128


@pytest.mark.parametrize(("model_type", "config", "needle"), [
    # Qwen2-VL's features need the grid of its patches beside the pixels.
    ("qwen2_vl", None, "its image features need more than pixels of shape [3, 224, 224]"),
    ("qwen2_vl", None, "it reads another input (image_grid_thw)"),
    # SmolVLM drops padding images by their values (its class default's image token, 128257,
    # is outside its default 32,000-token vocabulary: one inside it).
    ("smolvlm", {"image_token_id": 100},
     "its image features depend on the pixels' values, which the meta device"),
])
def test_a_model_whose_image_features_need_more_than_pixels_is_refused_in_one_line(
    profile_of: Any, model_type: str, config: dict[str, Any] | None, needle: str,
) -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": model_type, "config": config})
    text = str(err.value)
    # The head is the type's usual one, not a key the user set: the type is named.
    assert text.startswith(f"model.hf.model_type='{model_type}': model.hf.task unset takes its "
                           "usual head, 'image-text-to-text': ") and needle in text
    assert "\n" not in text and "model._target_" in text


def test_an_image_captioning_model_without_an_image_token_keeps_its_head() -> None:
    # BLIP's text decoder reads its image through cross-attention: no image token, so it is
    # no model of this head (its usual head stays the two towers' features).
    assert usual_task("blip") == "feature-extraction"


def test_an_image_token_outside_the_text_vocabulary_is_refused(profile_of: Any) -> None:
    # LLaVA's default image token, 32000, is no token of a 1,000-token vocabulary: the
    # language model's embedding would fail on it.
    small = {"text_config": TEXT, "vision_config": VISION}
    with pytest.raises(IpuTuneError, match=r"^model.hf.config.image_token_id=32000: a token of "
                       r"the text vocabulary, 0..999 \(text_config.vocab_size=1000; .*\): "
                       r"raise model.hf.config.text_config.vocab_size above 32000, as "):
        profile_of(name="hf", hf={"model_type": "llava", "config": small})


def test_a_vision_tower_failing_on_its_image_names_the_config(profile_of: Any) -> None:
    # A patch larger than the image: the config's sizes, not a missing input.
    small = {"text_config": TEXT, "image_token_id": 999,
             "vision_config": {**VISION, "image_size": 8}}
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": "llava", "config": small})
    text = str(err.value)
    assert text.startswith("model.hf.config={") and "\n" not in text
    assert "its vision tower fails on one image of shape [3, 8, 8] (RuntimeError: " in text


SMALL = {"text_config": TEXT, "vision_config": VISION, "image_token_id": 999}


@pytest.mark.parametrize(("model_type", "config", "needle"), [
    # PaliGemma's projector keeps its default width (2048) beside a 64-wide text model: the
    # meta device would not notice, Transformers' forward does.
    ("paligemma", SMALL, "its image features are 2048 wide and its text embeddings 64"),
    # VipLLaVA's default feature layers reach past a 3-layer tower.
    ("vipllava", SMALL, "model.hf.config.vision_feature_layer=(-2, -5, -8, -11, 6): indices of "
     "the vision tower's 4 hidden states, -4..3"),
    ("llava", {**SMALL, "image_token_id": 999.0}, "model.hf.config.image_token_id=999.0: an "
     "integer token id"),
    # An image of more tokens than the language model has positions names the config.
    ("llava", {**SMALL, "vision_config": {**VISION, "image_size": 16384}},
     "one image makes 1,048,576 image tokens, as many as the language model's"),
    # An encoder-decoder's decoder tokens are not modelled for this head.
    ("florence2", {"text_config": {"vocab_size": 51290}}, "florence2 is an encoder-decoder"),
])
def test_a_vision_language_config_that_cannot_run_is_refused_naming_why(
    profile_of: Any, model_type: str, config: dict[str, Any], needle: str,
) -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_of(name="hf", hf={"model_type": model_type, "config": config})
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_valid_feature_layers_of_a_tuple_profile(profile_of: Any) -> None:
    config = {**SMALL, "vision_feature_layers": [-2, -3, 0, 1, 2]}
    profile = profile_of(name="hf", hf={"model_type": "vipllava", "config": config})
    assert profile.paired_tokens == 16 + 128
