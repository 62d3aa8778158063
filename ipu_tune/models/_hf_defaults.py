"""Config defaults Transformers leaves unset and its own models then need (no torch import).

Some config classes default a size to None that their model class reads as a number: a head's
width `head_dim` (HunYuan, Ministral: `self.head_dim**-0.5`), the key-value head count
`num_key_value_heads` (Nemotron: `num_heads // num_key_value_heads`). Transformers' other
classes, and these models' published configs, give them the value their convention states:
`hidden_size // num_attention_heads` for the head width, `num_attention_heads` (plain
multi-head attention, Llama's default) for the key-value heads. A size the user or the file
gives is never changed, and a config that states a size keeps it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fill_derived_sizes"]


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
        fields = vars(sub)
        heads = getattr(sub, "num_attention_heads", None)
        hidden = getattr(sub, "hidden_size", None)
        if not isinstance(heads, int) or heads <= 0:
            continue
        if "head_dim" in fields and fields["head_dim"] is None and isinstance(hidden, int):
            sub.head_dim = hidden // heads
        if "num_key_value_heads" in fields and fields["num_key_value_heads"] is None:
            sub.num_key_value_heads = heads
