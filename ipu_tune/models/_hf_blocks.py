"""A Transformers model's pipeline blocks: its own layer lists (`bert.encoder.layer.N`,
`model.layers.N`, T5's `encoder.block.N` then `decoder.block.N`), each layer followed by the
layers of its own inner lists (a ConvNeXt, ResNet or Swin stage's), as optimum-graphcore's
`parallelize()` places them (`layers_per_ipu`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from ipu_tune.models._hf_config import layer_counts

__all__ = ["layer_lists", "with_inner_layers"]


def _lists_of(model: nn.Module, fits: Callable[[int], bool], mixed: bool = False) -> list[str]:
    """Outermost ModuleLists whose length `fits`, in module order: of one module class, or
    (`mixed`) of several classes that are all the model's own (`_own_layers`)."""
    found: list[str] = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.ModuleList) or not fits(len(module)):
            continue
        one_class = len({type(m) for m in module}) == 1
        if not (one_class or (mixed and _own_layers(module))) or any(
                name.startswith(f + ".") for f in found):
            continue
        found.append(name)
    return found


def _own_layers(modules: nn.ModuleList) -> bool:
    """Whether each entry is a layer class of the model's own, none a torch module: a hybrid's
    decoder layers (Jamba's `JambaAttentionDecoderLayer` and `JambaMambaDecoderLayer`, Zamba's,
    OLMo-Hybrid's; Mllama's self- and cross-attention layers; modeling_*.py), each run once,
    in order. A list that mixes torch's own modules (a Conv2d and a ReLU: Canary's subsampling,
    Mimi's convolution blocks) is parts of one layer, whatever its length."""
    return all(not type(m).__module__.startswith("torch.") for m in modules)


def layer_lists(model: nn.Module, config: Any) -> list[str]:
    """Paths of the model's own layer lists: ModuleLists of one layer class, or of the model's
    own layer classes (`_own_layers`: a hybrid's), whose length is one of the config's layer
    counts, in module order (T5: encoder then decoder). A config that counts none of its lists
    (MobileNetV2) gives its longest list of two or more layers of one class."""
    counts = layer_counts(config)
    found = _lists_of(model, counts.__contains__, mixed=True)
    stages = _stage_lists(model, getattr(config, "depths", None))
    if any(not any(s == f or s.startswith(f + ".") for f in found) for s in stages):
        return stages  # SwiftFormer: one stage's list was counted by its length alone
    if found:
        return found
    lists = _lists_of(model, lambda n: n >= 2)
    longest = max(lists, key=lambda name: len(list(model.get_submodule(name).children())),
                  default=None)  # fmt: skip
    return [longest] if longest else []


def _stage_lists(model: nn.Module, depths: Any) -> list[str]:
    """The layer lists of a staged model's stages, when it has one per entry of the config's
    `depths` (each stage's layer count) of that length, in order; else none. A stage list the
    counted lists hold (Swin's `encoder.layers.N.blocks`) adds nothing; one outside them (each
    of SwiftFormer's `encoder.network.N.blocks`, the stages separated by downsampling layers)
    is a stage the counted lists missed."""
    if not isinstance(depths, list | tuple) or not depths:
        return []
    found: list[str] = []
    for name, module in model.named_modules():
        if (isinstance(module, nn.ModuleList) and len(found) < len(depths)
                and len(module) == depths[len(found)] and _own_layers(module)):
            found.append(name)
    return found if len(found) == len(depths) else []


def with_inner_layers(model: nn.Module, layers: list[str]) -> list[str]:
    """`layers`, each followed by the layers of its own layer lists (its children that are
    lists of two or more modules of one class): a stage of ConvNeXt, ResNet or Swin holds a list
    of layers, where a pipeline may split too."""
    out: list[str] = []
    for layer in layers:
        children = model.get_submodule(layer).named_children()
        inner = [f"{layer}.{name}.{i}" for name, child in children
                 if isinstance(child, nn.ModuleList | nn.Sequential) and len(child) >= 2
                 and len({type(m) for m in child}) == 1 for i in range(len(child))]  # fmt: skip
        out += [layer, *inner]
    return out
