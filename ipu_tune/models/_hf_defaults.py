"""Config defaults Transformers leaves unset and its own models then need (no torch import).

Some config classes default a size to None that their model class reads as a number: a head's
width `head_dim` (HunYuan, Ministral: `self.head_dim**-0.5`), the key-value head count
`num_key_value_heads` (Nemotron: `num_heads // num_key_value_heads`). Transformers' other
classes, and these models' published configs, give them the value their convention states:
`hidden_size // num_attention_heads` for the head width, `num_attention_heads` (plain
multi-head attention, Llama's default) for the key-value heads. A size the user or the file
gives is never changed, and a config that states a size keeps it.

DETR and its kin (Conditional, Deformable and DAB-DETR, Table Transformer) default to timm's
`resnet50` as their backbone (`TimmBackboneConfig`), which needs the `timm` package. timm's
ResNets are the same networks as Transformers' own `ResNetConfig` ones (He et al. 2016; the
stride in the 3x3 convolution, "v1.5", in both; 23.5 M parameters for ResNet-50 without its
classifier): without timm the backbone is Transformers' ResNet of that depth, with the same
feature maps (timm's `out_indices` 1..4 are the stages `stage1`..`stage4`). Shapes, parameters
and FLOPs are those of timm's network; a timm backbone of another name still needs timm.

What trains is timm's too. DETR, Conditional and Deformable DETR and Table Transformer freeze
part of a ResNet backbone by its parameter names (`DetrConvEncoder.__init__`, modeling_detr.py
and its copies): with timm's, every name without `layer2`, `layer3` or `layer4` (the stem and
`layer1`); with any other, every name without `stage.1`, `stage.2` or `stage.3`, which
Transformers' ResNet never has (its names are `encoder.stages.N`), so the whole substitute
would be frozen, its backward and weight gradients gone. `timm_frozen_as_timm` sets the
substitute's trained weights to timm's: stages 1..3 (timm's `layer2`..`layer4`), not the stem
(`embedder`, timm's `conv1`) nor stage 0 (`layer1`). A model that freezes none of its backbone
(DAB-DETR) keeps it all trained, as it would timm's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fill_derived_sizes", "timm_frozen_as_timm", "timm_resnet_as_transformers"]


def _configs(config: Any) -> list[Any]:
    """`config` and its nested configs (a vision-language model's `text_config`, ...)."""
    from transformers import PretrainedConfig

    found = [config]
    for value in vars(config).values():
        if isinstance(value, PretrainedConfig):
            found += _configs(value)
    return found


def fill_derived_sizes(config: Any) -> None:
    """Set the sizes of `config` (and its nested configs) that are None to their conventional
    value (module docstring), where the config states what that value derives from."""
    for sub in _configs(config):
        # The stored fields only: a config whose sizes vary per layer refuses to give one
        # through its attributes (dots3's `per_layer_config`), and then has none to fill.
        fields = vars(sub)
        heads, hidden = fields.get("num_attention_heads"), fields.get("hidden_size")
        if not isinstance(heads, int) or heads <= 0:
            continue
        if "head_dim" in fields and fields["head_dim"] is None and isinstance(hidden, int):
            sub.head_dim = hidden // heads
        if "num_key_value_heads" in fields and fields["num_key_value_heads"] is None:
            sub.num_key_value_heads = heads


# timm's ResNet names: (block, blocks per stage), as timm's `resnet.py` and Transformers'
# `ResNetConfig` (layer_type, depths) state them.
_TIMM_RESNETS = {
    "resnet18": ("basic", [2, 2, 2, 2]), "resnet34": ("basic", [3, 4, 6, 3]),
    "resnet50": ("bottleneck", [3, 4, 6, 3]), "resnet101": ("bottleneck", [3, 4, 23, 3]),
    "resnet152": ("bottleneck", [3, 8, 36, 3]),
}  # fmt: skip


def timm_resnet_as_transformers(config: Any) -> None:
    """Without the `timm` package, a timm ResNet backbone becomes Transformers' ResNet of the
    same depth and feature maps (module docstring); else `config` is left as it is."""
    import importlib.util

    from transformers import ResNetConfig

    backbone = getattr(config, "backbone_config", None)
    if getattr(backbone, "model_type", None) != "timm_backbone" or (
            importlib.util.find_spec("timm") is not None):
        return
    name = str(getattr(backbone, "backbone", ""))
    layers = _TIMM_RESNETS.get(name)
    if layers is None or getattr(backbone, "output_stride", None) not in (None, 32):
        return  # another network, or dilated stages (DETR-DC5): timm's own, or refused
    indices = list(getattr(backbone, "out_indices", None) or [4])
    fields: dict[str, Any] = {"layer_type": layers[0], "depths": layers[1],
              "num_channels": getattr(backbone, "num_channels", 3),
              "out_features": [f"stage{i}" for i in indices if 1 <= i <= 4]}
    config.backbone_config = ResNetConfig(**fields)
    # The backbone the model builds holds this very config: the mark finds it there.
    config.backbone_config._timm_backbone = name


# timm's ResNet stages a DETR-family model trains (`layer2`..`layer4`, module docstring), as
# the names of Transformers' ResNet stages.
_TIMM_TRAINED = ("encoder.stages.1.", "encoder.stages.2.", "encoder.stages.3.")


def timm_frozen_as_timm(model: Any) -> None:
    """In `model` (built), a substitute for a timm ResNet (`timm_resnet_as_transformers`) that
    the model froze any of trains what timm's would: its stages 1..3 (module docstring)."""
    found: list[str] = []
    for path, module in model.named_modules():
        if getattr(getattr(module, "config", None), "_timm_backbone", None) is None or any(
                path.startswith(f"{f}.") for f in found):
            continue  # not the substitute, or a part of it holding its config as well
        found.append(path)
        weights = list(module.named_parameters())
        if all(w.requires_grad for _, w in weights):
            continue  # the model freezes none of its backbone (DAB-DETR): nor would timm's
        for name, weight in weights:
            weight.requires_grad_(name.startswith(_TIMM_TRAINED))
