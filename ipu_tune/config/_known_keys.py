"""Every key of a config is one its schema has: an unknown key is refused in one line naming
the keys its section allows, and the section that has it when it was written under another."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin, get_type_hints

from ipu_tune.config._schema import EvalConfig, TuneConfig
from ipu_tune.errors import IpuTuneError, key_name

__all__ = ["check_known_keys", "unknown_key_message"]


def _elsewhere(key: object, path: str) -> str:
    """` (it is a key of workload: workload.micro_batch_size)` when a top-level section other
    than `path`'s has the key: the usual slip of a key written under the wrong section."""
    top = path.partition(".")[0]
    for section, schema in get_type_hints(EvalConfig).items():
        if section != top and key in {f.name for f in dataclasses.fields(schema)}:
            return f" (it is a key of {section}: {section}.{key})"
    return ""


def check_known_keys(schema: type, data: Mapping[str, Any], path: str = "") -> None:
    """Every key of `data` is a field of `schema`, recursively into sections; only fields typed
    as free mappings (`model.kwargs`, `model.hf.config`, `sampler.params`) take any key. Hydra
    lets `+key=`/`++key=` and a config folder add keys to a composed config, and OmegaConf then
    sets them on the dataclass unchecked: a typo would be ignored yet change the fingerprint."""
    hints = get_type_hints(schema)
    names = {f.name for f in dataclasses.fields(schema)}
    for key, value in data.items():
        full = f"{path}.{key_name(key)}" if path else key_name(key)
        if key not in names:
            raise IpuTuneError(_unknown(full, key, path, names))
        hint = hints[str(key)]
        if get_origin(hint) is Union:
            hint = next(a for a in get_args(hint) if a is not type(None))
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            check_known_keys(hint, value, full)  # type: ignore[arg-type]


def _unknown(full: str, key: object, path: str, names: set[str]) -> str:
    return (f"{full}: unknown key{_elsewhere(key, path)}; allowed in {path or 'the config'}: "
            f"{', '.join(sorted(names))}")


def unknown_key_message(full_key: str) -> str | None:
    """`check_known_keys`'s line for `full_key`, a key the config schema has no field for (a
    composition OmegaConf refused), found by walking the schema along the key; None when a
    part of the key before the last is no section of it."""
    *parents, key = full_key.split(".")
    schema: Any = TuneConfig
    for part in parents:
        fields = {f.name for f in dataclasses.fields(schema)}
        hint = get_type_hints(schema).get(part) if part in fields else None
        if get_origin(hint) is Union:
            hint = next(a for a in get_args(hint) if a is not type(None))
        if hint is None or not dataclasses.is_dataclass(hint):
            return None
        schema = hint
    names = {f.name for f in dataclasses.fields(schema)}
    return None if key in names else _unknown(full_key, key, ".".join(parents), names)
