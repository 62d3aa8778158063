"""Turn a YAML path, a mapping or a DictConfig into a validated, typed config."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin, get_type_hints

from ipu_tune.config._schema import EvalConfig
from ipu_tune.config._validate import validate
from ipu_tune.errors import IpuTuneError

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from omegaconf.errors import OmegaConfBaseException

# OmegaConf (~0.3 s to import) and PyYAML load on first use: `evaluate(mapping)` of a valid
# mapping needs neither (issue 16).
__all__ = ["load_config", "omegaconf_error", "read_yaml", "to_plain_dict", "typed"]

T = TypeVar("T")


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


_Plan = tuple[tuple[tuple[str, Any, bool], ...], frozenset[str]]
_PLANS: dict[type, _Plan] = {}


def _plan_of(schema: type) -> _Plan:
    """((field name, type hint without Optional, optional), ...) and the field names of a
    dataclass schema, resolved once per schema."""
    found = _PLANS.get(schema)
    if found is None:
        hints = get_type_hints(schema)
        fields = []
        for f in dataclasses.fields(schema):
            hint = hints[f.name]
            optional = False
            if get_origin(hint) is Union:
                args = [a for a in get_args(hint) if a is not type(None)]
                optional, hint = True, args[0]
            fields.append((f.name, hint, optional))
        found = _PLANS[schema] = (tuple(fields), frozenset(name for name, _, _ in fields))
    return found


def _plain_any(value: Any) -> Any:
    """A value of a `Dict[str, Any]` field as OmegaConf returns it (str keys, lists, scalars)."""
    if value is None or type(value) in _SCALARS:
        if isinstance(value, str) and ("${" in value or value == "???"):
            raise _Fallback  # an interpolation or OmegaConf's missing marker
        return value
    if isinstance(value, Mapping):
        if not all(type(k) is str for k in value):
            raise _Fallback
        return {k: _plain_any(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_any(v) for v in value]
    raise _Fallback


def _convert(hint: Any, optional: bool, value: Any) -> Any:
    """`value` for a field typed `hint`, exactly as OmegaConf's merge + `to_object` would give it;
    `_Fallback` for anything else (a conversion OmegaConf does from strings, or an error)."""
    if value is None:
        if optional:
            return None
        raise _Fallback
    kind = type(value)
    if hint is int:
        if kind is int:
            return value
    elif hint is float:
        if kind is float or kind is int:
            return float(value)
    elif hint is bool:
        if kind is bool:
            return value
    elif hint is str:
        if kind is str and "${" not in value and value != "???":
            return value
    elif dataclasses.is_dataclass(hint):
        if isinstance(value, Mapping):
            return _merge(hint, value)  # type: ignore[arg-type]
    else:
        origin = get_origin(hint)
        if origin is list and isinstance(value, list | tuple):
            (item,) = get_args(hint)
            return [_convert(item, False, v) for v in value]
        if origin is dict and isinstance(value, Mapping):
            key_t, item_t = get_args(hint)
            if key_t is str and item_t is Any:
                return _plain_any(value)
        if hint is Any:
            return _plain_any(value)
    raise _Fallback


def _merge(schema: type[T], data: Mapping[str, Any]) -> T:
    """The schema's defaults with `data` merged over them, in plain Python (no OmegaConf)."""
    plan, names = _plan_of(schema)
    if any(key not in names for key in data):
        raise _Fallback  # unknown key: OmegaConf's message names it
    kwargs = {name: _convert(hint, optional, data[name])
              for name, hint, optional in plan if name in data}
    return schema(**kwargs)


def omegaconf_error(exc: OmegaConfBaseException) -> IpuTuneError:
    """One line from an OmegaConf merge/validation error: the full key, the value, the rule."""
    key = getattr(exc, "full_key", None) or ""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "not in" in msg and "Key '" in msg:
        return IpuTuneError(f"{key}: unknown key ({msg})")
    return IpuTuneError(f"{key}: {msg}" if key else msg)


def _reject_targets(node: Any, path: str = "") -> None:
    """Only `model._target_` may name a factory; anywhere else it is refused, not ignored."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "_target_" and path != "model":
                raise IpuTuneError(
                    f"{where}={value!r}: only model._target_ may name a factory to instantiate"
                )
            _reject_targets(value, where)
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
    root = "model" if schema.__name__ == "ModelConfig" else ""
    _reject_targets({k: v for k, v in plain.items() if k != "_target_"} if root else plain, root)
    if isinstance(plain, Mapping):
        try:
            return _merge(schema, plain)
        except _Fallback:
            pass
    return _omegaconf_typed(schema, cfg)


def _omegaconf_typed(schema: type[T], cfg: Any) -> T:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        base = OmegaConf.structured(schema)
        merged = OmegaConf.merge(base, cfg)
        obj = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    assert isinstance(obj, schema)
    return obj


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file with `safe_load` (it never constructs objects); one-line errors that
    name `what` ("config file", "space file") and the path."""
    import yaml

    try:
        text = path.read_text()
    except OSError as exc:
        raise IpuTuneError(f"{what} {str(path)!r}: cannot be read ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise IpuTuneError(f"{what} {str(path)!r}: not valid YAML{where}") from None


def _read_yaml(path: Path) -> Mapping[str, Any]:
    data = read_yaml(path, "config file")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise IpuTuneError(
            f"config file {str(path)!r}: expected a mapping with model/workload/system/plan, "
            f"got {type(data).__name__}"
        )
    return data


def load_config(source: str | Path | Mapping[str, Any] | EvalConfig) -> EvalConfig:
    """Load the contract schema from a YAML path or a mapping; missing keys take defaults.

    Keys outside model/workload/system/plan (an exported file's `ipu_tune:` provenance block,
    say) are ignored so that exports evaluate again unchanged.
    """
    if isinstance(source, EvalConfig):
        data: Mapping[str, Any] = to_plain_dict(source)
    elif isinstance(source, str | Path):
        data = _read_yaml(Path(source))
    elif _is_dictconfig(source):
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(source, resolve=True)  # type: ignore[assignment]
    elif isinstance(source, Mapping):
        data = source
    else:
        raise IpuTuneError(
            f"config: expected a YAML path or a mapping, got {type(source).__name__}"
        )
    sections = {f.name for f in dataclasses.fields(EvalConfig)}
    for key, value in data.items():
        if key in sections and value is not None and not isinstance(value, Mapping):
            raise IpuTuneError(f"{key}: expected a mapping, got {value!r}")
    picked = {k: v for k, v in data.items() if k in sections and v is not None}
    return validate(typed(EvalConfig, picked))


def to_plain_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config as plain JSON/YAML-ready containers (lists, not tuples).

    `dataclasses.asdict`, not OmegaConf: the tuner calls this once per trial and OmegaConf's
    structured round trip costs ~20 ms.
    """
    out = dataclasses.asdict(cfg)
    assert isinstance(out, dict)
    return out
