"""Turn a YAML path, a mapping or a DictConfig into a validated, typed config."""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ipu_tune.config._known_keys import check_known_keys
from ipu_tune.config._messages import omegaconf_error
from ipu_tune.config._old_defaults import forget_old_defaults
from ipu_tune.config._presets import system_preset, with_model_preset
from ipu_tune.config._schema import (
    EvalConfig,
    check_resolved_switches,
    check_switches,
)
from ipu_tune.config._shapes import check_shapes
from ipu_tune.config._validate import validate
from ipu_tune.config._yaml import read_yaml
from ipu_tune.errors import IpuTuneError, key_name

if TYPE_CHECKING:
    from omegaconf import DictConfig

# OmegaConf (~0.15 s to import) loads on first use: `evaluate(mapping)` of a valid mapping
# never needs it.
__all__ = ["check_trusted", "load_config", "omegaconf_error", "read_config_file",
           "section_mapping", "to_plain_dict",
           "typed"]

T = TypeVar("T")
# The provenance block of an exported best.yaml (`ipu_tune.exports`).
PROVENANCE_KEY = "ipu_tune"


def _is_dictconfig(value: Any) -> bool:
    """A DictConfig can only exist once OmegaConf was imported: never import it to ask."""
    if "omegaconf" not in sys.modules:
        return False
    from omegaconf import DictConfig

    return isinstance(value, DictConfig)


class _Fallback(Exception):
    """The fast merge met a value it does not convert itself: OmegaConf decides (and words the
    error exactly as before)."""


_SCALARS = (int, float, str, bool)


_Converter = Callable[[Any], Any]
_Plan = tuple[dict[str, _Converter], frozenset[str]]
_PLANS: dict[type, _Plan] = {}


def _plan_of(schema: type) -> _Plan:
    """{field name: converter of a value for it} and the field names of a dataclass schema,
    resolved once per schema (the type hints are not read again per call)."""
    found = _PLANS.get(schema)
    if found is None:
        hints = get_type_hints(schema)
        converters: dict[str, _Converter] = {}
        for f in dataclasses.fields(schema):
            hint = hints[f.name]
            optional = False
            if get_origin(hint) is Union:
                args = [a for a in get_args(hint) if a is not type(None)]
                optional, hint = True, args[0]
            converters[f.name] = _converter(hint, optional)
        found = _PLANS[schema] = (converters, frozenset(converters))
    return found


def _plain_any(value: Any) -> Any:
    """A value of a `Dict[str, Any]` field as OmegaConf returns it (str keys, lists, scalars)."""
    if value is None or type(value) in _SCALARS:
        if isinstance(value, str) and ("${" in value or value == "???"):
            raise _Fallback  # an interpolation or OmegaConf's missing marker
        return value
    if isinstance(value, Mapping):
        if not all(type(k) is str for k in value) or "_target_" in value:
            raise _Fallback  # `typed` refuses a factory named here (`_reject_targets`)
        return {k: _plain_any(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_any(v) for v in value]
    raise _Fallback


def _as_int(value: Any) -> Any:
    if type(value) is int:
        return value
    raise _Fallback


def _as_float(value: Any) -> Any:
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    raise _Fallback


def _as_bool(value: Any) -> Any:
    if type(value) is bool:
        return value
    raise _Fallback


def _as_str(value: Any) -> Any:
    if type(value) is str and "${" not in value and value != "???":
        return value
    raise _Fallback


def _fallback(value: Any) -> Any:
    raise _Fallback


def _converter(hint: Any, optional: bool) -> _Converter:
    """The function giving a value for a field typed `hint` exactly as OmegaConf's merge +
    `to_object` would; it raises `_Fallback` for anything else (a conversion OmegaConf does
    from strings, or an error). Chosen once per field: the per-call work is the value's own."""
    inner = _inner_converter(hint)
    if optional:
        def convert(value: Any) -> Any:
            return None if value is None else inner(value)
    elif inner is _plain_any:  # the one inner converter that takes None
        def convert(value: Any) -> Any:
            if value is None:
                raise _Fallback
            return inner(value)
    else:
        return inner  # refuses None itself: one call less per value
    return convert


def _inner_converter(hint: Any) -> _Converter:
    simple = {int: _as_int, float: _as_float, bool: _as_bool, str: _as_str}.get(hint)
    if simple is not None:
        return simple
    if dataclasses.is_dataclass(hint):
        schema = hint

        def nested(value: Any) -> Any:
            if type(value) is dict or isinstance(value, Mapping):
                return _merge(schema, value)  # type: ignore[arg-type]
            raise _Fallback
        return nested
    origin = get_origin(hint)
    if origin is list:
        (item_hint,) = get_args(hint)
        item = _converter(item_hint, False)

        def items(value: Any) -> Any:
            if isinstance(value, list | tuple):
                return [item(v) for v in value]
            raise _Fallback
        return items
    if origin is dict:
        key_t, item_t = get_args(hint)
        if key_t is str and item_t is Any:
            def plain_dict(value: Any) -> Any:
                if isinstance(value, Mapping):
                    return _plain_any(value)
                raise _Fallback
            return plain_dict
        return _fallback
    if hint is Any:
        return _plain_any
    return _fallback


def _merge(schema: type[T], data: Mapping[str, Any]) -> T:
    """The schema's defaults with `data` merged over them, in plain Python (no OmegaConf)."""
    converters = _plan_of(schema)[0]
    kwargs = {}
    for key, value in data.items():
        convert = converters.get(key)
        if convert is None:
            raise _Fallback  # unknown key: OmegaConf's message names it
        kwargs[key] = convert(value)
    return schema(**kwargs)


def _reject_targets(node: Any, path: str = "") -> None:
    """Only `model._target_` may name a factory; anywhere else it is refused, not ignored."""
    if type(node) is dict or isinstance(node, Mapping):  # dict first: ABC checks are slow
        for key, value in node.items():
            if key == "_target_" and path != "model":
                where = f"{path}.{key}" if path else str(key)
                raise IpuTuneError(
                    f"{where}={value!r}: only model._target_ may name a factory to instantiate"
                )
            if value is not None and type(value) not in _SCALARS:  # a path only below here
                _reject_targets(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for item in node:
            _reject_targets(item, path)


def typed(schema: type[T], cfg: DictConfig | Mapping[str, Any]) -> T:
    """Merge `cfg` over the schema's defaults and return the dataclass instance.

    A plain merge in Python first (~30 us; OmegaConf's structured merge costs ~15 ms, 99% of
    `evaluate(mapping)`); whatever it does not convert itself (strings OmegaConf coerces, bad
    types, unknown keys, interpolations) goes through OmegaConf, so the values and the error
    messages are OmegaConf's as before.
    """
    plain: Any = cfg
    if _is_dictconfig(cfg):
        from omegaconf import OmegaConf

        plain = OmegaConf.to_container(cfg, resolve=False)
    if isinstance(plain, Mapping):
        try:
            # Takes `_target_` only as the model's field: a factory named anywhere else is an
            # unknown key or a key of a plain dict (`_plain_any`), so it falls back to below.
            return _merge(schema, plain)
        except _Fallback:
            pass
    root = "model" if schema.__name__ == "ModelConfig" else ""
    if not _is_dictconfig(cfg):
        from ipu_tune.config._trust import reject_interpolation

        reject_interpolation(plain, root)  # a stored/plain config is data: never resolved
    _reject_targets({k: v for k, v in plain.items() if k != "_target_"} if root else plain, root)
    # Every key the schema has, with those it allows named (a composition: Hydra's `+`/`++`
    # added keys OmegaConf now takes; a file: OmegaConf's own words name none).
    check_known_keys(schema, plain, root)
    check_switches(schema, plain, root)
    if plain is not cfg:
        check_resolved_switches(schema, plain, root)
    # A composition's plain containers: it was composed against `loose_switches(schema)`,
    # which OmegaConf does not merge into `schema`.
    return _omegaconf_typed(schema, plain if plain is not cfg else cfg)


def _omegaconf_typed(schema: type[T], cfg: Any) -> T:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    # OmegaConf's merge words a value of the wrong shape (null, a mapping for a list, a list in
    # a list of numbers) without its key or value, or takes it: named here first.
    check_shapes(schema, cfg, "model" if schema.__name__ == "ModelConfig" else "")
    try:
        base = OmegaConf.structured(schema)
        merged = OmegaConf.merge(base, cfg)
        obj = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    assert isinstance(obj, schema)
    return obj


def _read_yaml(path: Path) -> Mapping[str, Any]:
    data = read_yaml(path, "config file")
    if data is None:
        raise IpuTuneError(
            f"config file {str(path)!r}: empty; expected a mapping with model/workload/system/plan"
        )
    if not isinstance(data, Mapping):
        raise IpuTuneError(
            f"config file {str(path)!r}: expected a mapping with model/workload/system/plan, "
            f"got {type(data).__name__}"
        )
    return data


def read_config_file(path: str | Path, trust_remote_code: bool = False) -> Mapping[str, Any]:
    """A config file's mapping as written (no preset or default filled in), refused when it
    names code to run and `trust_remote_code` is not given."""
    data = _read_yaml(Path(path))
    if not trust_remote_code:
        check_trusted(data, f"config file {str(path)!r}")
    return data


def check_trusted(data: Mapping[str, Any], where: str) -> None:
    model = data.get("model")
    target = model.get("_target_") if isinstance(model, Mapping) else None
    if target:
        raise IpuTuneError(
            f"model._target_={str(target)[:80]!r} in {where}: code named in a file runs only "
            "with --trust-remote-code (trust_remote_code=True in Python); allowed without it: "
            "model.name of the zoo"
        )


_SECTIONS = frozenset(f.name for f in dataclasses.fields(EvalConfig))


def load_config(
    source: str | Path | Mapping[str, Any] | EvalConfig, trust_remote_code: bool = False
) -> EvalConfig:
    """Load the contract schema from a YAML path or a mapping; missing keys take defaults.

    Top-level keys are model/workload/system/plan and an exported file's `ipu_tune:` provenance
    block (ignored, so exports evaluate again unchanged); any other key is refused. A YAML file
    naming `model._target_` is refused unless `trust_remote_code` (the file's author chose the
    code to run, not the user).
    """
    return validate(load_unvalidated(source, trust_remote_code))


def load_unvalidated(
    source: str | Path | Mapping[str, Any] | EvalConfig, trust_remote_code: bool = False
) -> EvalConfig:
    """`load_config` before the checks across keys (`validate`): what overrides apply to, so
    that a file completed by them (`system: pod16` with `plan.replication_factor=16`) is checked
    as completed. Types, unknown keys and the trust rule are checked here."""
    if type(source) is dict:  # the API's usual input, first: ABC checks are slow
        data: Mapping[str, Any] = source
    elif isinstance(source, EvalConfig):
        data = to_plain_dict(source)
    elif isinstance(source, str | Path):
        data = read_config_file(source, trust_remote_code)
    elif _is_dictconfig(source):
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(source, resolve=True)  # type: ignore[assignment]
    elif isinstance(source, Mapping):
        data = source
    else:
        raise IpuTuneError(
            f"config: expected a YAML path or a mapping, got {type(source).__name__}"
        )
    sections = _SECTIONS
    for key in data:
        if key not in sections and key != PROVENANCE_KEY:
            raise IpuTuneError(
                f"{key_name(key)}: unknown top-level key; allowed: {', '.join(sorted(sections))}, "
                f"{PROVENANCE_KEY}"
            )
    if PROVENANCE_KEY in data:  # an export, perhaps from before model keys could be unset
        data = forget_old_defaults(data)
    picked = {k: section_mapping(k, v) for k, v in data.items() if k in sections and v is not None}
    return typed(EvalConfig, with_model_preset(picked))


def section_mapping(key: str, value: Any) -> Any:
    """A top-level section as a mapping; `system` may name a preset (`system: pod16`) and
    `model` a zoo model (`model: resnet50`), as `system=pod16 model=resnet50` do on the command
    line."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    if key == "system" and isinstance(value, str):
        return system_preset(value)
    if key == "model" and isinstance(value, str):
        return {"name": value}
    raise IpuTuneError(f"{key}: expected a mapping, got {value!r}")


def to_plain_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config as plain JSON/YAML-ready containers: `dataclasses.asdict`'s result.

    Neither OmegaConf (its structured round trip costs ~20 ms) nor `asdict` itself, which
    deep-copies every leaf: the tuner calls this once per trial (0.25 ms with `asdict`, about
    a fifth of that here; tests/config/test_typed_merge.py checks they agree).
    """
    out = _plain(cfg)
    assert isinstance(out, dict)
    return out


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # per dataclass, filled on first use


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


def _plain(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in _SCALARS:
        return value
    if kind is list:
        return [_plain(v) for v in value]
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _field_names(kind)}
    return copy.deepcopy(value)  # what `asdict` does with any other leaf
