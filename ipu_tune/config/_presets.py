"""Presets named in a config file: `system: pod64` and `model: {name: resnet50}` (or `model:
resnet50`) mean what `system=pod64 model=resnet50` mean on the command line."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ipu_tune.config._hydra import CONF_DIR, group_options
from ipu_tune.config._yaml import read_yaml
from ipu_tune.errors import IpuTuneError, did_you_mean

__all__ = ["system_preset", "with_model_preset"]


@cache
def _presets(group: str) -> frozenset[str]:
    return frozenset(group_options(group))  # the package's files: read once per process


def with_model_preset(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` over the preset of the zoo model it names (conf/model/NAME.yaml), as `model=NAME`
    composes it on the command line: the keys `data` gives win, mappings merge key by key. So
    `model: {name: resnet50}` is ResNet-50 at 224x224 with 1000 classes and the micro-batch
    Graphcore ran, not the schema's seed-sized defaults. No preset for a factory
    (`model._target_`) or a name without one."""
    model = data.get("model")
    if not isinstance(model, Mapping) or "_target_" in model:
        return data
    name = model.get("name")
    if not isinstance(name, str) or name not in _presets("model"):
        return data
    # The cached sections are only read: `typed` builds new objects from every value.
    preset = _model_preset(name)
    return {**data, **{k: _merged(v, data[k]) if k in data else v for k, v in preset.items()}}


@cache
def _model_preset(name: str) -> dict[str, Any]:
    """The `model:` and `workload:` sections of model preset `name`, an alias followed to the
    preset it names in its `defaults:` list."""
    data = read_yaml(CONF_DIR / "model" / f"{name}.yaml", "model preset") or {}
    base: dict[str, Any] = {}
    for entry in data.get("defaults", []):
        if entry != "_self_":
            base = _model_preset(str(entry))
    return {k: _merged(base[k], data[k]) if k in base and k in data else data.get(k, base.get(k))
            for k in ("model", "workload") if k in base or k in data}


def _merged(under: Any, over: Any) -> Any:
    """`over` merged onto `under`: mappings key by key (a key `over` gives wins, null too),
    anything else `over`."""
    if isinstance(under, Mapping) and isinstance(over, Mapping):
        return {**under, **{k: _merged(under[k], v) if k in under else v
                            for k, v in over.items()}}
    return over


def system_preset(name: str) -> Mapping[str, Any]:
    """The `system:` section of preset `name` (conf/system/NAME.yaml)."""
    names = sorted(_presets("system"))
    if name not in names:
        raise IpuTuneError(f"system={name!r}: not a system preset; allowed: a mapping "
                           f"(ipu, num_ipus, hosts, host) or one of {', '.join(names)}"
                           f"{did_you_mean(name, names)}")
    data = read_yaml(CONF_DIR / "system" / f"{name}.yaml", "system preset")
    assert isinstance(data, Mapping)
    return data
