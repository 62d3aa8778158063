"""Vision-language models that put their image features into the text (LLaVA, PaliGemma,
InternVL): the `image-text-to-text` head.

Such a model reads pixels and token ids. Its vision tower turns each image into features, a
projector maps them to the language model's width, and they take the places of an image token
(the config's `image_token_id`) in the ids; the language model then runs on the whole sequence
and predicts the next token (Liu et al. 2023, "Visual Instruction Tuning", Figure 1;
Transformers' `get_placeholder_mask`). The ids must hold exactly as many image tokens as the
tower makes features, so their count is read from the model itself: its `get_image_features`
on one image of the config's size. A model that needs more than pixels for its features (the
grid of Qwen2-VL's patches, LLaVA-NeXT's image sizes) is refused in one line.

The pixels are the main input; the ids stream beside them (`paired_tokens`, int32), the image
tokens first, then text. `model.sequence_length` counts the whole sequence, image tokens
included, as the language model's positions do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from ipu_tune.errors import bad_value
from ipu_tune.models._config_json import _one_line
from ipu_tune.models._hf_names import IMAGE_TOKEN_KEYS
from ipu_tune.models._hf_runner import AS_FACTORY

__all__ = ["check_feature_layers", "image_sizes", "image_token_id", "image_tokens_call",
           "image_tokens_per_image"]

_TASK = "image-text-to-text"


def image_token_id(config: Any, vocab_size: Any) -> int:
    """The id at whose places the model puts its image features, a token of the language
    model's `vocab_size` (its embedding looks the id up before the features replace it); a
    config naming none is refused (it is no model of this head)."""
    for key in IMAGE_TOKEN_KEYS:
        value = getattr(config, key, None)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad_value(f"model.hf.config.{key}", value, "an integer token id")
        if isinstance(vocab_size, int) and not 0 <= value < vocab_size:
            # Transformers' own config classes default some so (LLaVA: 32000 of 32000): the
            # model fails on them in Transformers too; published checkpoints add the token.
            raise bad_value(f"model.hf.config.{key}", value, f"a token of the text "
                            f"vocabulary, 0..{vocab_size - 1} (text_config.vocab_size="
                            f"{vocab_size}; its embedding looks the id up, so Transformers "
                            f"fails on it too): raise model.hf.config.text_config.vocab_size "
                            f"above {value}, as the model's published checkpoints do")
        return value
    raise bad_value("model.hf.task", _TASK, f"a vision-language model whose config names its "
                    f"image token ({' or '.join(IMAGE_TOKEN_KEYS)}); {config.model_type}'s "
                    "names none")


def image_tokens_per_image(model: nn.Module, image: tuple[int, ...],
                           config_key: tuple[str, Any]) -> tuple[int, tuple[int, ...]]:
    """The image tokens one sample's image needs, and the sample's pixel shape: the rows of
    the features the model makes of one `image` (channels, height, width), given as it takes
    images: one per sample, or a list of one per sample (Idefics' and SmolVLM's
    images x channels x height x width). `get_image_features` runs on the model's device. A
    tower that fails on the image for its sizes (a patch larger than the image) is refused
    naming `config_key`, the config's key and value."""
    get = getattr(model, "get_image_features", None)
    if get is None:
        raise bad_value("model.hf.task", _TASK, f"it has no get_image_features: {AS_FACTORY}")
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    failures: list[Exception] = []
    for shape in (image, (1, *image)):
        pixels = torch.zeros((1, *shape), device=device)
        try:
            features = _features(get(pixel_values=pixels, **image_sizes(model, pixels)))
        except Exception as exc:  # any failure: try the next shape, or refuse
            failures.append(exc)
            continue
        rows = sum(f.numel() // int(f.shape[-1]) for f in features)
        if rows < 1:
            raise bad_value("model.hf.task", _TASK, "its vision tower makes no features of an "
                            f"image of shape {list(image)}")
        _check_width(model, features, config_key)
        return rows, shape
    # A shape that got as far as the pixels' values (`.item()`, `nonzero` on the meta device)
    # is the one the model takes; else the first shape's failure says what is missing.
    meta = next((f for f in failures if "meta" in str(f).lower()), None)
    if meta is not None:
        raise bad_value("model.hf.task", _TASK, "its image features depend on the pixels' "
                        f"values, which the meta device does not hold ({_one_line(meta)}): "
                        f"{AS_FACTORY}")
    others = _other_inputs(get)
    if others:
        raise bad_value("model.hf.task", _TASK, f"its image features need more than pixels of "
                        f"shape {list(image)} ({_one_line(failures[0])}); it reads another "
                        f"input ({', '.join(others)}): {AS_FACTORY}")
    raise bad_value(*config_key, f"its vision tower fails on one image of shape {list(image)} "
                    f"({_one_line(failures[0])})")


# What `get_image_features` may take besides the pixels that no input of the model's is: the
# config's feature choices (LLaVA's layer and strategy), optional masks, and the image sizes
# `image_sizes` gives.
_NOT_INPUTS = ("self", "pixel_values", "kwargs", "image_sizes")


def _other_inputs(get: Callable[..., Any]) -> list[str]:
    """The inputs besides pixels `get` takes (Qwen2-VL's `image_grid_thw`)."""
    return [name for name, p in inspect.signature(get).parameters.items()
            if name not in _NOT_INPUTS and not name.startswith("vision_feature")
            and not name.endswith("_mask") and p.kind is not p.VAR_KEYWORD]


def image_sizes(model: nn.Module, pixels: Tensor) -> dict[str, Tensor]:
    """`image_sizes` for a model that asks each image's (height, width) beside its pixels
    (LLaVA-NeXT, Mistral 3): the pixels' own, as its processor gives them for an image it did
    not resize; nothing for the others."""
    get = getattr(model, "get_image_features", None)
    if get is None or "image_sizes" not in inspect.signature(get).parameters:
        return {}
    sides = torch.tensor([list(pixels.shape[-2:])], device=pixels.device)
    return {"image_sizes": sides.expand(pixels.shape[0], 2)}


def _features(out: Any) -> list[Tensor]:
    """The feature tensors in `out` (each rows x width, or images x rows x width): a tensor, a
    list of per-image tensors, or a model output holding one of them as `pooler_output` (the
    projected features, Transformers 5) or first."""
    if isinstance(out, Tensor):
        return [out] if out.dim() >= 2 and out.shape[-1] > 0 else []
    if isinstance(out, list | tuple):
        return [f for item in out for f in _features(item)]
    pooled = getattr(out, "pooler_output", None)
    if pooled is None and hasattr(out, "to_tuple"):
        pooled = out.to_tuple()[0]
    if pooled is None:
        raise TypeError(f"get_image_features returned {type(out).__name__}")
    return _features(pooled)


def _check_width(model: nn.Module, features: list[Tensor], config_key: tuple[str, Any]) -> None:
    """The features take the places of token embeddings, so they are as wide; the meta device
    does not check it (`masked_scatter`), Transformers' forward does."""
    embeddings = model.get_input_embeddings()  # type: ignore[operator]
    width = getattr(embeddings, "embedding_dim", None)
    found = {int(f.shape[-1]) for f in features}
    if isinstance(width, int) and found != {width}:
        raise bad_value(*config_key, f"its image features are {min(found)} wide and its text "
                        f"embeddings {width}: the features cannot take the image tokens' "
                        "places (a projection size that differs from the text width)")


def check_feature_layers(config: Any) -> None:
    """LLaVA's `vision_feature_layer` (VipLLaVA's `vision_feature_layers`) index the vision
    tower's hidden states: its layers and its embeddings, so -(n + 1)..n for n layers."""
    layers = getattr(getattr(config, "vision_config", None), "num_hidden_layers", None)
    if not isinstance(layers, int):
        return
    for key in ("vision_feature_layer", "vision_feature_layers"):
        value = getattr(config, key, None)
        indices = list(value) if isinstance(value, list | tuple) else [value]
        if value is not None and not all(
                isinstance(i, int) and -(layers + 1) <= i <= layers for i in indices):
            raise bad_value(f"model.hf.config.{key}", value, f"indices of the vision tower's "
                            f"{layers + 1} hidden states, {-(layers + 1)}..{layers} "
                            f"(vision_config.num_hidden_layers={layers})")


def image_tokens_call(image_tokens: int, tokens: int, image_id: int,
                      token_id: int) -> Callable[[nn.Module, Tensor], Any]:
    """The call of a vision-language model on its pixels, each with `tokens` ids: the image's
    `image_tokens` places first, then usual text tokens; a mask of ones. Its output is the
    language model's next-token logits (the stand-in loss runs on every position: the real
    one skips the image places, a share of one elementwise op)."""

    def call(model: nn.Module, pixels: Tensor) -> Any:
        ids = torch.full((pixels.shape[0], tokens), token_id, dtype=torch.long,
                         device=pixels.device)
        ids[:, :image_tokens] = image_id
        out = model(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids),
                    use_cache=False, **image_sizes(model, pixels))
        return out.logits

    return call
