"""The model zoo: names of `model.name` and the torch builders behind them.

Builders take the `model:` config section and return an `nn.Module` with a `pipeline_blocks`
attribute (module names where a pipeline stage may begin). They are called under
``torch.device("meta")``, so no weights are allocated.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from torch import nn

from ipu_tune.config import ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._hf_names import HUB_MODELS, hf_source
from ipu_tune.models._resnet import BasicBlock, Bottleneck, ResNet

__all__ = [
    "ZOO", "ZOO_ALIASES", "ZooEntry", "build_model", "hf_source", "resolve_target", "zoo_entry"
]


@dataclass(frozen=True)
class ZooEntry:
    name: str
    description: str
    input_kind: str  # "image" or "tokens"
    build: Callable[[ModelConfig], nn.Module]


def _image_dims(cfg: ModelConfig) -> tuple[int, int, int]:
    shape = cfg.image_shape()
    if len(shape) != 3:
        raise bad_value("model.input_shape", shape, "[channels, height, width]")
    c, h, w = shape
    return int(c), int(h), int(w)


def _resnet(
    block: type[BasicBlock | Bottleneck], layers: list[int], groups: int = 1, width: int = 64
) -> Callable[[ModelConfig], nn.Module]:
    def build(cfg: ModelConfig) -> nn.Module:
        c, _, _ = _image_dims(cfg)
        kwargs: dict[str, Any] = {"groups": groups, "width_per_group": width, **cfg.kwargs}
        return ResNet(block, layers, num_classes=cfg.classes(), in_channels=c, **kwargs)

    return build


def _mnist(cfg: ModelConfig) -> nn.Module:
    from ipu_tune.models._mnist import MnistCnn

    c, h, w = _image_dims(cfg)
    return MnistCnn(c, h, w, num_classes=cfg.classes(), **cfg.kwargs)


def _bert(size: str) -> Callable[[ModelConfig], nn.Module]:
    def build(cfg: ModelConfig) -> nn.Module:
        from ipu_tune.models._bert import BERT_SIZES, BertForMaskedLM

        model = BertForMaskedLM(**{**BERT_SIZES[size], **cfg.kwargs})
        vocab = model.cls.predictions.decoder.out_features
        if cfg.num_classes not in (None, vocab):
            raise bad_value("model.num_classes", cfg.num_classes,
                            f"unset or {vocab}: {cfg.name}'s masked-LM head predicts its "
                            "vocabulary (model.kwargs.vocab_size)")
        seq = cfg.sequence_length
        if seq is not None and seq > model.max_position_embeddings:
            raise bad_value(
                "model.sequence_length", seq,
                f"at most {model.max_position_embeddings} "
                "(or raise model.kwargs.max_position_embeddings)",
            )  # fmt: skip
        return model

    return build


def _vit(cfg: ModelConfig) -> nn.Module:
    from ipu_tune.models._vit import VisionTransformer

    c, h, w = _image_dims(cfg)
    if h != w:
        raise bad_value("model.input_shape", cfg.image_shape(), "square images for vit_b_16")
    kwargs: dict[str, Any] = {"patch_size": 16, "num_layers": 12, "num_heads": 12,
                              "hidden_dim": 768, "mlp_dim": 3072, **cfg.kwargs}  # fmt: skip
    patch = kwargs["patch_size"]
    if isinstance(patch, int) and patch > 0 and h % patch:
        raise bad_value("model.input_shape", cfg.image_shape(),
                        f"height and width multiples of the patch size, {patch}, for "
                        f"{cfg.name} (e.g. [{c}, {h // patch * patch or patch}, "
                        f"{h // patch * patch or patch}])")
    return VisionTransformer(image_size=h, in_channels=c, num_classes=cfg.classes(), **kwargs)


def _efficientnet(name: str) -> Callable[[ModelConfig], nn.Module]:
    def build(cfg: ModelConfig) -> nn.Module:
        from ipu_tune.models._efficientnet import EFFICIENTNET, EfficientNet

        c, _, _ = _image_dims(cfg)
        width, depth, dropout, _ = EFFICIENTNET[name]
        kwargs: dict[str, Any] = {"dropout": dropout, **cfg.kwargs}
        return EfficientNet(width, depth, num_classes=cfg.classes(), in_channels=c, **kwargs)

    return build


def _hf(cfg: ModelConfig) -> nn.Module:
    from ipu_tune.models._hf import build_hf

    source = hf_source(cfg)
    assert source is not None
    return build_hf(source)[0]


_ENTRIES = (
    ZooEntry("resnet18", "ResNet-18 (He et al. 2016), torchvision layout", "image",
             _resnet(BasicBlock, [2, 2, 2, 2])),
    ZooEntry("resnet34", "ResNet-34, torchvision layout", "image",
             _resnet(BasicBlock, [3, 4, 6, 3])),
    ZooEntry("resnet50", "ResNet-50 v1.5, torchvision layout", "image",
             _resnet(Bottleneck, [3, 4, 6, 3])),
    ZooEntry("resnet101", "ResNet-101 v1.5, torchvision layout (the seed tutorial's model)",
             "image", _resnet(Bottleneck, [3, 4, 23, 3])),
    ZooEntry("resnet152", "ResNet-152 v1.5, torchvision layout", "image",
             _resnet(Bottleneck, [3, 8, 36, 3])),
    ZooEntry("resnext50_32x4d", "ResNeXt-50 32x4d (Xie et al. 2017), torchvision layout", "image",
             _resnet(Bottleneck, [3, 4, 6, 3], groups=32, width=4)),
    ZooEntry("resnext101_32x8d", "ResNeXt-101 32x8d, torchvision layout", "image",
             _resnet(Bottleneck, [3, 4, 23, 3], groups=32, width=8)),
    ZooEntry("bert_base", "BERT-Base encoder + MLM head (Devlin et al. 2019)", "tokens",
             _bert("base")),
    ZooEntry("bert_large", "BERT-Large encoder + MLM head (Devlin et al. 2019)", "tokens",
             _bert("large")),
    ZooEntry("vit_b_16", "ViT-B/16 (Dosovitskiy et al. 2021), torchvision layout", "image", _vit),
    ZooEntry("mnist_cnn", "4-block MNIST CNN of the PopTorch pipelining tutorial", "image",
             _mnist),
    *(ZooEntry(f"efficientnet_b{i}", f"EfficientNet-B{i} (Tan & Le 2019), torchvision layout",
               "image", _efficientnet(f"efficientnet_b{i}")) for i in range(5)),
    *(ZooEntry(name, hub.text, "tokens", _hf) for name, hub in HUB_MODELS.items()),
)  # fmt: skip

ZOO: Mapping[str, ZooEntry] = MappingProxyType({e.name: e for e in _ENTRIES})
# Earlier ipu-tune names, kept so old configs and studies still load; the primary names are
# torchvision's builder names (torchvision.models.resnext50_32x4d, ..., vit_b_16).
ZOO_ALIASES: Mapping[str, str] = MappingProxyType(
    {"resnext50": "resnext50_32x4d", "resnext101": "resnext101_32x8d", "vit_b16": "vit_b_16"}
)


def zoo_entry(name: str | None) -> ZooEntry | None:
    """The zoo entry of a primary name or an alias; None when `name` is not a zoo model."""
    key = name or ""
    return ZOO.get(ZOO_ALIASES.get(key, key))


_TARGET_ALLOWED = (
    "allowed: a torch.nn.Module subclass, or a function annotated to return one, defined "
    "outside the Python standard library and builtins"
)


def _is_stdlib(module_name: str) -> bool:
    top = module_name.split(".", 1)[0]
    return top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "builtins"


def _check_target(target: str, obj: object) -> None:
    """A target is a Module subclass or a plain function from non-stdlib code; nothing else
    (os.system, subprocess.getoutput, builtins.eval, a class's constructor of any kind)."""
    if inspect.isclass(obj):
        if issubclass(obj, nn.Module):
            return
        raise bad_value("model._target_", target, f"class {obj.__name__} is not a "
                        f"torch.nn.Module; {_TARGET_ALLOWED}")
    if not (inspect.isfunction(obj) and not inspect.isbuiltin(obj)):
        raise bad_value("model._target_", target,
                        f"{type(obj).__name__} is not a Python function; {_TARGET_ALLOWED}")
    defined_in = getattr(obj, "__module__", None) or ""
    if _is_stdlib(defined_in):
        raise bad_value("model._target_", target,
                        f"defined in the standard library ({defined_in}); {_TARGET_ALLOWED}")
    returns = _return_type(obj)
    if not (inspect.isclass(returns) and issubclass(returns, nn.Module)):
        # Decided before the call: a function that runs commands (pip's call_subprocess,
        # annotated `-> str`) or returns anything else is never called.
        raise bad_value("model._target_", target,
                        f"a function must be annotated to return a torch.nn.Module; this one "
                        f"returns {_type_name(obj, returns)}, not a torch.nn.Module")


def _return_type(func: Callable[..., Any]) -> Any:
    """The return annotation of `func`, resolved (None when absent or unresolvable)."""
    try:
        return typing.get_type_hints(func).get("return")
    except Exception:  # an annotation naming what its module does not define
        return None


def _type_name(func: Callable[..., Any], resolved: Any) -> str:
    if resolved is not None:
        return str(getattr(resolved, "__name__", resolved))
    raw = inspect.signature(func).return_annotation
    if raw is inspect.Signature.empty:
        return "no annotation"
    return str(getattr(raw, "__name__", raw))


def resolve_target(target: str) -> Callable[..., Any]:
    """Import the callable named by a dotted path (``package.module.factory``) and check that
    it may be called (`_check_target`) before anything calls it."""
    module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise bad_value("model._target_", target, "a dotted path such as 'package.module.factory'")
    if _is_stdlib(module_name):
        # Refused before the import: importing a stdlib module can run code too (antigravity).
        raise bad_value("model._target_", target, f"in the standard library; {_TARGET_ALLOWED}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise bad_value(
            "model._target_", target, f"cannot import {module_name!r} ({_one_line(exc)})"
        ) from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise bad_value("model._target_", target, f"module {module_name!r} has no {attr!r}")
    if not callable(obj):
        raise bad_value(
            "model._target_", target, f"{type(obj).__name__} is not callable; name a factory"
        )
    _check_target(target, obj)
    return obj


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_unread(cfg: ModelConfig, input_kind: str) -> None:
    """A zoo model of images reads `model.input_shape`, one of tokens `model.sequence_length`:
    the other, given, would be ignored without a word."""
    if input_kind == "image" and cfg.sequence_length is not None:
        raise bad_value("model.sequence_length", cfg.sequence_length,
                        f"unset: {cfg.name} reads images (model.input_shape="
                        f"{cfg.image_shape()}), not tokens")
    if input_kind == "tokens" and cfg.input_shape is not None:
        raise bad_value("model.input_shape", list(cfg.input_shape),
                        f"unset: {cfg.name} reads token ids, model.sequence_length of them")


def build_model(cfg: ModelConfig) -> tuple[nn.Module, str]:
    """Build the model of `cfg` (call under the meta device). Returns (module, input kind)."""
    if cfg._target_:
        factory = resolve_target(cfg._target_)
        try:
            model = factory(**cfg.kwargs)
        except Exception as exc:
            raise bad_value(
                "model._target_", cfg._target_, f"factory failed ({_one_line(exc)})"
            ) from None
        if not isinstance(model, nn.Module):
            raise bad_value(
                "model._target_", cfg._target_,
                f"returned {type(model).__name__}, not a torch.nn.Module",
            )  # fmt: skip
        kind = "tokens" if cfg.sequence_length is not None else "image"
        _check_unread(cfg, kind)
        return model, kind
    source = hf_source(cfg)
    if source is not None:
        from ipu_tune.models._hf import build_hf

        runner, kind, _ = build_hf(source)
        return runner, kind
    entry = zoo_entry(cfg.name)
    if entry is None:
        aliases = ", ".join(f"{a} (= {n})" for a, n in ZOO_ALIASES.items())
        raise bad_value(
            "model.name", cfg.name, "zoo models: " + ", ".join(ZOO) + "; aliases: " + aliases,
            [*ZOO, *ZOO_ALIASES],
        )
    _check_unread(cfg, entry.input_kind)
    try:
        return entry.build(cfg), entry.input_kind
    except IpuTuneError:
        raise
    except (TypeError, ValueError, ArithmeticError, RuntimeError) as exc:
        # A builder's own checks, Python's (a patch of 0) and torch's (a negative width).
        raise _builder_error(cfg, exc) from None


def _builder_error(cfg: ModelConfig, exc: Exception) -> IpuTuneError:
    """A zoo builder's failure, blamed on what the user gave: a keyword the preset derives from
    the input shape or the classes (`got multiple values for argument 'width'`), else the
    keywords, else the input shape and classes the builder's arguments come from."""
    taken = re.search(r"got multiple values for (?:keyword )?argument '(\w+)'", str(exc))
    if taken and taken.group(1) in cfg.kwargs:
        key = taken.group(1)
        return bad_value(f"model.kwargs.{key}", cfg.kwargs[key],
                         f"set by {cfg.name} from model.input_shape and model.num_classes; "
                         "give those instead")
    if cfg.kwargs:
        return bad_value("model.kwargs", dict(cfg.kwargs), f"{cfg.name}: {_one_line(exc)}")
    return bad_value("model.input_shape", cfg.image_shape(),
                     f"{cfg.name} cannot be built for it with model.num_classes="
                     f"{cfg.classes()} ({_one_line(exc)})")
