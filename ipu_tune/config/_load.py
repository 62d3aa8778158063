"""Turn a YAML path, a mapping or a DictConfig into a validated, typed config."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ipu_tune.config._schema import EvalConfig
from ipu_tune.config._validate import validate
from ipu_tune.errors import IpuTuneError

__all__ = ["load_config", "omegaconf_error", "read_yaml", "to_plain_dict", "typed"]

T = TypeVar("T")


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
    """Merge `cfg` over the schema's defaults and return the dataclass instance."""
    plain: Any = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    root = "model" if schema.__name__ == "ModelConfig" else ""
    if root:
        plain = {k: v for k, v in plain.items() if k != "_target_"}
    _reject_targets(plain, root)
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
    elif isinstance(source, DictConfig):
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
