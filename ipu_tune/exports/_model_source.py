"""Source lines that build the model in an exported program, without importing ipu_tune.

A Poplar SDK environment has poptorch, torch and torchvision, not ipu-tune (the SDK pins an older
torch). Zoo models are therefore built with the public constructors that have the module names
ipu-tune profiled: torchvision's ResNet/ResNeXt/ViT builders, and Hugging Face `transformers`'
`BertForMaskedLM` for BERT (whose encoder sits under `bert.`). The MNIST CNN of the PopTorch
pipelining tutorial has no public constructor, so its definition is written out. `_target_` models
are imported from the user's own module.
"""

from __future__ import annotations

import inspect
import json
import keyword
from typing import Any

from ipu_tune.config import EvalConfig
from ipu_tune.errors import bad_value
from ipu_tune.models import ModelProfile

__all__ = [
    "literal", "masked_count", "masked_zoo_bert", "model_imports", "model_lines", "module_access",
    "module_path", "relative_config_note",
]

# ipu-tune zoo name -> torchvision.models builder (aliases resolve to the primary name first).
_TORCHVISION = {
    "resnet18": "resnet18",
    "resnet34": "resnet34",
    "resnet50": "resnet50",
    "resnet101": "resnet101",
    "resnet152": "resnet152",
    "resnext50_32x4d": "resnext50_32x4d",
    "resnext101_32x8d": "resnext101_32x8d",
    "vit_b_16": "vit_b_16",
    **{f"efficientnet_b{i}": f"efficientnet_b{i}" for i in range(5)},
}
_ALIASES = {"resnext50": "resnext50_32x4d", "resnext101": "resnext101_32x8d", "vit_b16": "vit_b_16"}
_BERT = {
    "bert_base": {"num_layers": 12, "hidden": 768, "num_heads": 12, "intermediate": 3072},
    "bert_large": {"num_layers": 24, "hidden": 1024, "num_heads": 16, "intermediate": 4096},
}
# ipu-tune BERT keyword -> transformers.BertConfig keyword (Hugging Face BertConfig docs).
_BERT_CONFIG_KEYS = {
    "num_layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "num_heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "vocab_size": "vocab_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
}
_VIT_ARCH = ("patch_size", "num_layers", "num_heads", "hidden_dim", "mlp_dim")


def zoo_name(cfg: EvalConfig) -> str | None:
    """The primary zoo name of the config's model, or None for a `_target_` model."""
    if cfg.model._target_:
        return None
    name = str(cfg.model.name)
    return _ALIASES.get(name, name)


def literal(value: Any) -> str:
    """Python literal of a JSON-like value, strings in double quotes (ruff's style)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _plain(value: Any) -> Any:
    """JSON-like copy of a config value (OmegaConf containers have no literal repr)."""
    return json.loads(json.dumps(value, default=str))


def _kwargs(values: dict[str, Any]) -> str:
    """Call arguments `a=1, b="x"`; `**{...}` when a key is not a Python name."""
    plain = _plain(values)
    if all(k.isidentifier() and not keyword.iskeyword(k) for k in plain):
        return ", ".join(f"{k}={literal(v)}" for k, v in plain.items())
    return "**" + literal(plain)


def _is_name(part: str) -> bool:
    return part.isidentifier() and not keyword.iskeyword(part)


def module_access(path: str, root: str = "model") -> str:
    """Python expression of a torch submodule: 'layer3.8' -> 'model.layer3[8]'."""
    expr = root
    for part in path.split("."):
        if part.isdigit():
            expr += f"[{int(part)}]"  # nn.Sequential / nn.ModuleList child
        elif _is_name(part):
            expr += f".{part}"
        else:
            expr = f"getattr({expr}, {part!r})"
    return expr


def module_path(cfg: EvalConfig, block: str) -> str:
    """Name of an ipu-tune block in the exported model (transformers nests BERT under `bert.`)."""
    if zoo_name(cfg) in _BERT and block.split(".")[0] != "cls":  # the head's modules too
        return f"bert.{block}"
    return block


def _hf_parts(cfg: EvalConfig) -> tuple[str, str] | None:
    """(auto class, config expression) of a Transformers model (`model.hf`, GPT-2 sizes); for
    a tower `AutoModel` does not build, its base model class (`unregistered_tower`)."""
    from ipu_tune.models import (
        TASKS,
        hf_identity,
        hf_overrides,
        hf_settings,
        hf_source,
        unregistered_tower,
    )

    source = hf_source(cfg.model)
    if source is None:
        return None
    model_type, task = hf_identity(source)
    # As the profile built it: the overrides, then what ipu-tune sets (labels, padding token).
    args = _kwargs({**hf_overrides(source), **hf_settings(source)})
    file = source.hf.config_file
    if file:  # as given: a folder, or the file (whatever its name), which Transformers reads
        config = f"AutoConfig.from_pretrained({literal(file)}{', ' if args else ''}{args})"
    else:
        config = f"AutoConfig.for_model({literal(model_type)}{', ' if args else ''}{args})"
    tower = unregistered_tower(model_type) if task == "feature-extraction" else None
    return tower or TASKS[task], config


def model_imports(cfg: EvalConfig) -> list[str]:
    """Third-party imports the model lines need (beside torch)."""
    hf = _hf_parts(cfg)
    if hf is not None:
        return [f"from transformers import AutoConfig, {hf[0]}"]
    name = zoo_name(cfg)
    if name in _TORCHVISION:
        return ["import torchvision"]
    if name in _BERT:
        return ["from transformers import BertConfig, BertForMaskedLM"]
    if name == "mnist_cnn":
        return ["from torch import nn"]
    return []


def _image_channels(cfg: EvalConfig) -> int:
    shape = cfg.model.image_shape()
    return int(shape[0]) if shape else 3


def _torchvision_lines(cfg: EvalConfig, name: str) -> list[str]:
    kwargs = _plain(dict(cfg.model.kwargs))
    kwargs["num_classes"] = cfg.model.classes()
    builder = f"torchvision.models.{_TORCHVISION[name]}"
    if name == "vit_b_16":
        size = int(cfg.model.image_shape()[-1])
        if any(k in kwargs for k in _VIT_ARCH):
            arch = {"patch_size": 16, "num_layers": 12, "num_heads": 12, "hidden_dim": 768,
                    "mlp_dim": 3072}  # fmt: skip
            kwargs = {"image_size": size, **arch, **kwargs}
            builder = "torchvision.models.VisionTransformer"
        else:
            kwargs = {"image_size": size, **kwargs}
    out = [
        f"# {name}: {builder}, the module names ipu-tune profiled, so the BeginBlock placements"
        " below address the same layers. Random weights: load your own state_dict.",
        f"model = {builder}({_kwargs(kwargs)})",
    ]
    channels = _image_channels(cfg)
    if channels != 3:  # torchvision's stems take RGB; ipu-tune profiled this many channels
        if name == "vit_b_16":
            out += [
                f"# {channels} input channels instead of 3: a new patch projection.",
                "model.conv_proj = torch.nn.Conv2d("
                f"{channels}, model.hidden_dim, model.patch_size, stride=model.patch_size)",
            ]
        elif name.startswith("efficientnet"):
            out += [
                f"# {channels} input channels instead of 3: a new stem convolution.",
                "model.features[0][0] = torch.nn.Conv2d("
                f"{channels}, model.features[0][0].out_channels, 3, 2, 1, bias=False)",
            ]
        else:
            out += [
                f"# {channels} input channels instead of 3: a new stem convolution.",
                "model.conv1 = torch.nn.Conv2d("
                f"{channels}, 64, kernel_size=7, stride=2, padding=3, bias=False)",
            ]
    return out


def _bert_lines(cfg: EvalConfig, name: str, profile: ModelProfile | None) -> list[str]:
    args = {**_BERT[name], **_plain(dict(cfg.model.kwargs))}
    config = {_BERT_CONFIG_KEYS[k]: v for k, v in args.items() if k in _BERT_CONFIG_KEYS}
    if "dropout" in args:
        config["hidden_dropout_prob"] = args["dropout"]
        config["attention_probs_dropout_prob"] = args["dropout"]
    out = [
        f"# {name}: Hugging Face transformers' BertForMaskedLM (encoder + masked-LM head), the"
        " model ipu-tune profiled; its blocks are model.bert.embeddings,"
        " model.bert.encoder.layer[i] and model.cls. Random weights: load your own.",
        f"model = BertForMaskedLM(BertConfig({_kwargs(config)}))",
    ]
    positions = masked_count(cfg, profile)
    if positions is None:
        return out
    return [*out,
            f"# ipu-tune profiled the MLM head on {positions} masked positions, as Graphcore's"
            " BERT runs it: your data puts each sequence's masked tokens first, and the head"
            " runs on those positions only (MaskedPositions, below).",
            f"MASKED_POSITIONS = {positions}"]


def masked_zoo_bert(cfg: EvalConfig, profile: ModelProfile | None) -> bool:
    """A zoo BERT whose head ran on the masked positions only: the program runs it there."""
    return zoo_name(cfg) in _BERT and masked_count(cfg, profile) is not None


def masked_count(cfg: EvalConfig, profile: ModelProfile | None) -> int | None:
    """The masked tokens the profiled head ran on (`model.kwargs.masked_positions`, `auto`
    resolved at the profiled sequence length), or None: every token."""
    from ipu_tune.models import DEFAULT_SEQUENCE_LENGTH, masked_positions

    if profile is not None and profile.input_kind == "tokens":
        seq = int(profile.input_shape[0])
    else:
        seq = cfg.model.sequence_length or DEFAULT_SEQUENCE_LENGTH
    return masked_positions(cfg.model.kwargs.get("masked_positions"), seq)


def _masked_note(cfg: EvalConfig, head: str, profile: ModelProfile | None) -> list[str]:
    positions = masked_count(cfg, profile)
    if positions is None:
        return []
    return [f"# ipu-tune profiled the MLM head on {positions} masked positions: gather them"
            f" before {head} as Graphcore's BERT example does."]


def _mnist_lines(cfg: EvalConfig) -> list[str]:
    import torch

    from ipu_tune.models import build_model

    with torch.device("meta"):  # only its classes are wanted: no weights
        model = build_model(cfg.model)[0]
    classes = (type(model.get_submodule("layer1")), type(model))
    c, h, w = (int(v) for v in cfg.model.image_shape())
    kwargs = {"in_channels": c, "height": h, "width": w, "num_classes": cfg.model.classes(),
              **_plain(dict(cfg.model.kwargs))}  # fmt: skip
    source = [inspect.getsource(cls) for cls in classes]
    return [
        "# mnist_cnn: the CNN of the PopTorch pipelining tutorial (blocks layer1..layer4).",
        "",
        "",
        *"\n\n".join(s.rstrip() for s in source).replace("Tensor", "torch.Tensor").splitlines(),
        "",
        "",
        f"model = MnistCnn({_kwargs(kwargs)})",
    ]


def relative_config_note(path: str) -> list[str]:
    """The comment a program gives a relative `model.hf.config_file` (none for another)."""
    if not path or path.startswith(("/", "~")):
        return []
    return ["# model.hf.config_file as given, relative to the folder ipu-tune ran in: run this "
            "program from there"]


def _host_values_note(profile: ModelProfile | None, own: bool = False) -> list[str]:
    """What the profile's step ran that a graph of fixed shapes cannot hold (it was traced on
    the CPU for it): PopTorch traces the model once and compiles that graph. `own`: the
    user's model, which no optimum-graphcore class replaces."""
    if profile is None or not profile.meta_failure:
        return []
    fix = ("" if own else " (optimum-graphcore's pipelined classes do so for the models they"
           " register)")
    return [f"# Traced on the CPU: on the meta device its step ran {profile.meta_failure}.",
            "# An operator whose output shape depends on the input's values, or a value read back"
            " to the host, may not compile under PopTorch, which traces the model once into a"
            f" graph of fixed shapes: replace that code with one of fixed shapes{fix}."]


def model_lines(cfg: EvalConfig, profile: ModelProfile | None) -> list[str]:
    """Lines that leave the model ipu-tune profiled (`profile`, if known) in `model` (needs
    `import torch`)."""
    m = cfg.model
    if m._target_:
        module, _, fn = m._target_.rpartition(".")
        return [
            f"# Your own model (model._target_ = {m._target_}), as ipu-tune profiled it.",
            f"from {module} import {fn} as build_model  # noqa: E402",
            "",
            f"model = build_model({_kwargs(dict(m.kwargs))})",
            *_host_values_note(profile, own=True),
        ]
    hf = _hf_parts(cfg)
    if hf is not None:
        first = ("feature encoder" if profile is not None and profile.input_kind == "audio"
                 else "input embeddings")
        out = [
            *relative_config_note(m.hf.config_file or ""),
            f"# Hugging Face Transformers' {hf[0]} built from the configuration ipu-tune"
            f" profiled (blocks: the {first}, then the model's own layer list)."
            " Random weights: use .from_pretrained(...) for trained ones.",
            # A class of its own (a tower AutoModel does not build) takes the config itself.
            f"model = {hf[0]}{'.from_config' if hf[0].startswith('Auto') else ''}({hf[1]})",
        ]
        return out + _masked_note(cfg, "the head", profile) + _host_values_note(profile)
    name = zoo_name(cfg) or ""
    if name in _TORCHVISION:
        return _torchvision_lines(cfg, name)
    if name in _BERT:
        return _bert_lines(cfg, name, profile)
    if name == "mnist_cnn":
        return _mnist_lines(cfg)
    raise bad_value("model.name", m.name, "a zoo model or model._target_ for the exports")
