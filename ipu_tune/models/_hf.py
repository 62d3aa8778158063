"""Hugging Face Transformers models by configuration, built on the meta device (no weights).

`build_hf(cfg)` makes the config of `model.hf` (a model type with overrides, or a downloaded
`config.json`), builds the task's model class from it (`AutoModelFor...from_config`) under the
meta device, and wraps it so that the profiler traces one training step with the inputs the
family takes (token ids and an attention mask; pixels; encoder and decoder ids).

Pipeline blocks are the model's own layer lists (`bert.encoder.layer.N`, `transformer.h.N`,
`model.layers.N`, `vit.encoder.layer.N`, T5's `encoder.block.N` then `decoder.block.N`), behind
one first block holding the input embeddings, as optimum-graphcore's `parallelize()` places them
(`optimum/graphcore/models/*/modeling_*.py`: embeddings on IPU0, layer i on `layers_per_ipu`'s
IPU). A head whose weight is tied to the input embeddings (masked-LM, causal-LM, T5's LM head)
runs on IPU0 there as well; `head_on_first_stage` names it so that the profiler charges it to
the first stage. Other heads (classifiers) run on the last IPU, after the last layer.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

from torch import nn

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._config_json import _one_line
from ipu_tune.models._cpu_step import usual_token_id
from ipu_tune.models._hf_audio import audio_model
from ipu_tune.models._hf_blocks import layer_lists, with_inner_layers
from ipu_tune.models._hf_config import (
    check_classes,
    check_tables,
    hf_config,
    hf_settings,
)
from ipu_tune.models._hf_defaults import timm_frozen_as_timm
from ipu_tune.models._hf_meta import grouped_experts, skip_padding_warning
from ipu_tune.models._hf_names import (
    AUDIO_TASKS,
    TASKS,
    config_source,
    heads_of,
    hf_task,
    splices_images,
    unregistered_tower,
    usual_task,
)
from ipu_tune.models._hf_runner import (
    AS_FACTORY,
    HfRunner,
    causal_call,
    image_call,
    image_text_call,
    seq2seq_call,
    text_call,
    tower_call,
)
from ipu_tune.models._hf_vision_text import (
    check_feature_layers,
    image_token_id,
    image_tokens_call,
    image_tokens_per_image,
)
from ipu_tune.models._masked import masked_positions

__all__ = ["build_hf"]

_MAX_POSITION_KEYS = ("max_position_embeddings", "n_positions")


def _module_name(model: nn.Module, target: nn.Module | None) -> str | None:
    if target is None:
        return None
    return next((n for n, m in model.named_modules() if m is target), None)


def _tied_head(model: nn.Module) -> str | None:
    """Top-level module holding an output projection tied to the input embeddings (optimum-
    graphcore places it on IPU0), else None (the head runs after the last layer)."""
    out, inp = model.get_output_embeddings(), _input_embeddings(model)  # type: ignore[operator]
    if out is None or inp is None or out.weight is not inp.weight:
        return None
    name = _module_name(model, out)
    return name.split(".", 1)[0] if name else None


def _input_embeddings(model: nn.Module) -> nn.Module | None:
    try:
        emb: nn.Module | None = model.get_input_embeddings()  # type: ignore[operator]
    except NotImplementedError:  # vision models without a token embedding (ConvNeXt, ResNet)
        return None
    return emb


def _first_block(model: nn.Module, first_layers: str) -> str | None:
    """The input embeddings' module name; of the modules sharing their weight (T5's `shared`
    and `encoder.embed_tokens`), the one nearest the first layer list, which is the one run.
    None for a model without input embeddings: what runs before its first layer (a stem)
    belongs to the first layer's block."""
    emb = _input_embeddings(model)
    if emb is None:
        return None
    weight = getattr(emb, "weight", None)
    names = [n for n, m in model.named_modules(remove_duplicate=False)
             if m is emb or (weight is not None and getattr(m, "weight", None) is weight)]
    if not names:
        return next(n for n, _ in model.named_children())

    def shared_prefix(name: str) -> int:
        # Path components in common with the first layer list, from the start.
        pairs = zip(name.split("."), first_layers.split("."), strict=False)
        return len(list(itertools.takewhile(lambda p: p[0] == p[1], pairs)))

    name = max(names, key=shared_prefix)  # the first of equals: max keeps the first
    parent = name.rpartition(".")[0]
    return parent if parent.endswith("embeddings") else name


def _head_error(cfg: ModelConfig, config: Any, task: str, exc: Exception) -> IpuTuneError:
    """Why the auto class of `task` did not build `config`: no such head, its class's defaults,
    or a setting the user gave (an unknown activation)."""
    key, value = config_source(cfg, False)
    if "Unrecognized configuration class" in str(exc):
        heads = ", ".join(heads_of(config.model_type)) or "none of them"
        return bad_value("model.hf.task", task, f"a head Transformers builds for "
                         f"{config.model_type}: {heads}")
    if key == "model.hf.model_type":  # the head exists; its class's defaults do not build
        return bad_value(key, value, f"Transformers cannot build it as {task} from its config "
                         f"class's defaults ({_one_line(exc)}); give the sizes of a published "
                         "model in model.hf.config, or its config.json as model.hf.config_file")
    return bad_value(key, value, f"its {task} model does not build: {_one_line(exc)}")


def build_hf(cfg: ModelConfig) -> tuple[HfRunner, str, tuple[int, ...]]:
    """(runner, input kind, per-sample input shape) of `cfg.hf`; call under the meta device
    (and `transformers_on_meta`). Audio heads: `_hf_audio`."""
    import transformers

    config = hf_config(cfg)
    task = hf_task(cfg, config.model_type, getattr(config, "architectures", None))
    check_classes(cfg, config, task)
    for key, value in hf_settings(cfg, config).items():
        setattr(config, key, value)
    auto = getattr(transformers, TASKS[task])
    if config.architectures is None:
        # The auto classes read the list to choose among a task's classes (DeiT has two image
        # classifiers) and fail on None, a config class's default: none saved, the first.
        config.architectures = []
    try:
        model = _from_config(auto, config, task)
    except (ValueError, KeyError) as exc:
        if task == "feature-extraction":  # the base model itself: its defaults do not build
            raise
        raise _head_error(cfg, config, task, exc) from None
    check_tables(cfg, model)
    skip_padding_warning(model)
    grouped_experts(model)
    timm_frozen_as_timm(model)  # DETR's backbone trains timm's stages
    lists = layer_lists(model, config)
    if task in AUDIO_TASKS:
        _masked_positions(cfg, task, None, 0)  # refuses model.kwargs
        return audio_model(cfg, config, model, lists, task)
    layers = with_inner_layers(model, [f"{p}.{i}" for p in lists
                                        for i in range(len(model.get_submodule(p)))])
    first = _first_block(model, lists[0] if lists else "")
    # A model with no layer list (ALBERT runs one shared layer N times) is one block.
    blocks = [first, *layers] if first else layers
    if task == "feature-extraction":
        return _tower(cfg, config, model, blocks)
    if task == "image-classification":
        _masked_positions(cfg, task, None, 0)  # refuses model.kwargs
        return HfRunner(model, image_call, blocks, None), "image", _pixels(cfg, config)
    if task == "image-text-to-text":
        return _vision_text(cfg, config, model, blocks)
    seq = _sequence_length(cfg, config)
    causal = task == "causal-lm" or usual_task(config.model_type) == "causal-lm"
    call = seq2seq_call if task == "seq2seq-lm" else causal_call if causal else text_call
    head = _tied_head(model)
    _gather_masked(model, head, _masked_positions(cfg, task, head, seq))
    return HfRunner(model, call, blocks, head), "tokens", (seq,)


def _from_config(auto: Any, config: Any, task: str) -> Any:
    """The model of `task` from `config`; a tower `AutoModel` does not build (a composite
    model's `siglip_text_model`) is built by its base model class."""
    import transformers

    tower = unregistered_tower(config.model_type) if task == "feature-extraction" else None
    if tower is not None:
        return getattr(transformers, tower)(config)
    return auto.from_config(config)


def _tower(cfg: ModelConfig, config: Any, model: nn.Module,
           blocks: list[str]) -> tuple[HfRunner, str, tuple[int, ...]]:
    """A base model without a head, on its one input: pixels, or token ids with a mask of ones
    (decoders inspect the positions without one). A model of several inputs (a vision-language
    model's pixels and ids, audio features) needs its head named."""
    main = str(getattr(model, "main_input_name", ""))
    takes = inspect.signature(model.forward).parameters
    if main not in takes:  # PreTrainedModel's default, input_ids, kept by a vision tower
        main = next((name for name in ("pixel_values", "input_ids") if name in takes), main)
    if main not in ("input_ids", "pixel_values"):
        raise bad_value("model.hf.task", "feature-extraction",
                        f"a model of one input, token ids or pixels; {config.model_type} reads "
                        f"{main or 'no main input'}: {AS_FACTORY}")  # fmt: skip
    text = getattr(config, "text_config", None)
    if {"input_ids", "pixel_values"} <= set(takes) and text is not None and getattr(
            config, "vision_config", None) is not None and not splices_images(config):
        return _image_text(cfg, config, text, model, blocks)
    if main == "pixel_values":
        _masked_positions(cfg, "feature-extraction", None, 0)  # refuses model.kwargs
        runner = HfRunner(model, image_call, blocks, None, tower_input=main)
        return runner, "image", _pixels(cfg, config)
    seq = _sequence_length(cfg, config)
    _masked_positions(cfg, "feature-extraction", None, seq)
    return HfRunner(model, tower_call, blocks, None, tower_input=main), "tokens", (seq,)


def _vision_text(cfg: ModelConfig, config: Any, model: nn.Module,
                 blocks: list[str]) -> tuple[HfRunner, str, tuple[int, ...]]:
    """A vision-language model that splices its image features into the text
    (`_hf_vision_text`): pixels in, each with `model.sequence_length` ids (default: its image
    tokens and 128 text tokens), the image's places first; next-token logits out."""
    _masked_positions(cfg, "image-text-to-text", None, 0)  # refuses model.kwargs
    text = getattr(config, "text_config", None) or config
    if getattr(config, "is_encoder_decoder", False) or getattr(text, "is_encoder_decoder", False):
        raise bad_value("model.hf.task", "image-text-to-text", f"{config.model_type} is an "
                        "encoder-decoder: its decoder's tokens beside the image and prompt are "
                        f"not modelled for this head; {AS_FACTORY}")
    image_id = image_token_id(config, getattr(text, "vocab_size", None))
    check_feature_layers(config)
    places, shape = image_tokens_per_image(model, _pixel_shape(config), config_source(cfg, False))
    seq = _sequence_length(cfg, text, "text_config.", extra=places)
    if seq <= places and cfg.sequence_length is None:  # the image alone fills the positions
        raise bad_value(*config_source(cfg, False), f"one image makes {places:,} image tokens, "
                        f"as many as the language model's {seq:,} positions or more: a smaller "
                        "image, a larger patch or more positions")
    if seq <= places:
        raise bad_value("model.sequence_length", seq, f"more than the image's {places} tokens "
                        f"(its features take {places} places in the ids)")
    call = image_tokens_call(places, seq, image_id, usual_token_id(model))
    runner = HfRunner(model, call, blocks, None)
    runner.paired_tokens = seq
    return runner, "image", shape


def _image_text(cfg: ModelConfig, config: Any, text: Any, model: nn.Module,
                blocks: list[str]) -> tuple[HfRunner, str, tuple[int, ...]]:
    """A model of an image tower and a text tower (CLIP, ALIGN, BLIP, OWL-ViT): its pixels
    stream in as the main input, each with a caption of `model.sequence_length` token ids
    (default: the text tower's length, CLIP's 77), trained under CLIP's symmetric
    contrastive loss (`image_text_call`)."""
    _masked_positions(cfg, "feature-extraction", None, 0)  # refuses model.kwargs
    seq = _sequence_length(cfg, text, "text_config.")
    runner = HfRunner(model, image_text_call(seq, usual_token_id(model)), blocks, None)
    runner.paired_tokens = seq
    return runner, "image", _pixel_shape(config)


# The image side of a config that states none (ResNet, ConvNeXt's crop, SegFormer's
# classifier): 224, the crop Transformers' image processors for these models default to.
_DEFAULT_IMAGE_SIZE = 224


def _pixels(cfg: ModelConfig, config: Any) -> tuple[int, ...]:
    """`_pixel_shape` of a model that reads pixels alone: `model.sequence_length`, given,
    would be ignored without a word."""
    shape = _pixel_shape(config)
    if cfg.sequence_length is not None:
        raise bad_value("model.sequence_length", cfg.sequence_length,
                        f"unset: {config.model_type} reads pixels alone, {list(shape)} as its "
                        "config sizes them (model.hf.config.image_size)")
    return shape


def _pixel_shape(config: Any) -> tuple[int, ...]:
    """The pixels of one sample: (channels, height, width) from the config's `image_size` (a
    side, or [height, width]: MGP-STR's 32 x 128, YOLOS's 512 x 864), else its vision
    tower's (CLIP), else 224 square; a video model's `num_frames` frames first, (frames,
    channels, height, width), as VideoMAE, ViViT and TimeSformer take `pixel_values`."""
    sides: tuple[int, int] = (_DEFAULT_IMAGE_SIZE, _DEFAULT_IMAGE_SIZE)
    channels = getattr(config, "num_channels", None)
    for source in (config, getattr(config, "vision_config", None)):
        size = getattr(source, "image_size", None) if source is not None else None
        if isinstance(size, int) and not isinstance(size, bool):
            sides = (size, size)
        elif isinstance(size, list | tuple) and len(size) == 2 and all(
                isinstance(d, int) for d in size):
            sides = (int(size[0]), int(size[1]))
        else:
            continue
        channels = getattr(source, "num_channels", None)
        break
    image = (int(channels) if isinstance(channels, int) else 3, *sides)
    frames = getattr(config, "num_frames", None)
    if frames is None:  # X-CLIP's: its vision tower's
        frames = getattr(getattr(config, "vision_config", None), "num_frames", None)
    return (frames, *image) if isinstance(frames, int) and frames > 0 else image


def _masked_positions(cfg: ModelConfig, task: str, head: str | None, seq: int) -> int | None:
    """`model.kwargs.masked_positions`, the one keyword the Transformers path takes: the
    tokens a masked-LM head runs on (optimum-graphcore's `config.max_num_masked_tokens`)."""
    extra = sorted(set(cfg.kwargs) - {"masked_positions"})
    if extra:
        raise bad_value(f"model.kwargs.{extra[0]}", cfg.kwargs[extra[0]],
                        "only masked_positions for a Transformers model; set its config "
                        "fields in model.hf.config")  # fmt: skip
    value = cfg.kwargs.get("masked_positions")
    if value is None:
        return None
    if task != "masked-lm" or head is None:
        raise bad_value("model.kwargs.masked_positions", value,
                        f"only for a masked-lm head tied to the embeddings (task {task})")
    return masked_positions(value, seq)


def _gather_masked(model: nn.Module, head: str | None, positions: int | None) -> None:
    """Run the tied masked-LM head on `positions` tokens, as optimum-graphcore gathers the
    masked ones first (`PipelinedBertForMaskedLM`: topk of the labels, `OnehotGather`); the
    first positions stand in for them (same shapes, same cost)."""
    if head is None or positions is None:
        return
    k = positions

    def first_tokens(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0][:, :k], *args[1:])

    model.get_submodule(head).register_forward_pre_hook(first_tokens)


def _sequence_length(cfg: ModelConfig, config: Any, where: str = "", extra: int = 0) -> int:
    """`model.sequence_length`, at most the config's position limit; not given: 128 tokens
    (plus `extra`, a vision-language model's image tokens), or the limit if it is shorter
    (CLIP's text tower: 77). `where`: the config's path in `model.hf.config` (a text tower's,
    `text_config.`)."""
    from ipu_tune.models._profile import DEFAULT_SEQUENCE_LENGTH

    # A limit of 0 or below is none (XLNet's -1: relative positions, any length).
    limits = [(value, key) for key in _MAX_POSITION_KEYS
              if isinstance(value := getattr(config, key, None), int) and value > 0]
    if cfg.sequence_length is None:
        return min([DEFAULT_SEQUENCE_LENGTH + extra, *(value for value, _ in limits)])
    seq = cfg.sequence_length
    for limit, key in limits:
        if limit < seq:
            raise bad_value("model.sequence_length", seq,
                            f"at most {limit} ({key} of the config): model.sequence_length="
                            f"{limit}, or raise model.hf.config.{where}{key}")  # fmt: skip
    return seq
