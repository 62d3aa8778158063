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

__all__ = [
    "MAX_YAML_BYTES",
    "check_trusted",
    "load_config",
    "omegaconf_error",
    "read_text",
    "read_yaml",
    "to_plain_dict",
    "typed",
]

T = TypeVar("T")
# The provenance block of an exported best.yaml (results/_export.py).
PROVENANCE_KEY = "ipu_tune"


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


# Limits of the one YAML reader: config, space and constants files are a few KiB, 5 levels deep,
# and use no anchors; anything far beyond is an accident or an attack (billion laughs).
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 50
MAX_YAML_NODES = 100_000
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _check_shape(text: str, what: str, path: Path) -> None:
    """Walk the event stream (no recursion, no construction): depth and nodes after alias
    expansion stay within limits, so neither RecursionError nor a billion laughs can follow."""
    frames: list[list[Any]] = [[None, 0]]  # [anchor, nodes] of each open collection
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            frames.append([event.anchor, 1])
            if len(frames) - 1 > MAX_YAML_DEPTH:
                raise IpuTuneError(
                    f"{what} {str(path)!r}: nested deeper than {MAX_YAML_DEPTH} levels")
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, n = frames.pop()
        elif isinstance(event, yaml.AliasEvent):
            anchor, n = None, sizes.get(str(event.anchor), 1)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, n = event.anchor, 1
        else:
            continue
        if anchor is not None:
            sizes[str(anchor)] = n
        frames[-1][1] += n
        if frames[-1][1] > MAX_YAML_NODES or sum(f[1] for f in frames) > MAX_YAML_NODES:
            raise IpuTuneError(
                f"{what} {str(path)!r}: more than {MAX_YAML_NODES} values once aliases are "
                "expanded; allowed: plain YAML without alias bombs")


def read_text(path: Path, what: str) -> str:
    """A text file of at most 1 MiB, UTF-8 without NUL bytes; one line naming `what` else."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise IpuTuneError(f"{what} {str(path)!r}: cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_YAML_BYTES:
        raise IpuTuneError(f"{what} {str(path)!r}: larger than {MAX_YAML_BYTES} bytes (1 MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IpuTuneError(f"{what} {str(path)!r}: not a UTF-8 text file") from None
    if "\x00" in text:
        raise IpuTuneError(f"{what} {str(path)!r}: binary file (NUL bytes); expected text")
    return text


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file with `safe_load` (it never constructs objects); one-line errors that
    name `what` ("config file", "space file") and the path. Refuses files over 1 MiB, binary or
    non-UTF-8 files, nesting over 50 levels and alias bombs before building anything."""
    text = read_text(path, what)
    try:
        _check_shape(text, what, path)
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise IpuTuneError(f"{what} {str(path)!r}: not valid YAML{where}") from None
    except RecursionError:
        raise IpuTuneError(
            f"{what} {str(path)!r}: nested deeper than {MAX_YAML_DEPTH} levels") from None


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


def check_trusted(data: Mapping[str, Any], where: str) -> None:
    model = data.get("model")
    target = model.get("_target_") if isinstance(model, Mapping) else None
    if target:
        raise IpuTuneError(
            f"model._target_={str(target)[:80]!r} in {where}: code named in a file runs only "
            "with --trust-remote-code (trust_remote_code=True in Python); allowed without it: "
            "model.name of the zoo"
        )


def load_config(
    source: str | Path | Mapping[str, Any] | EvalConfig, trust_remote_code: bool = False
) -> EvalConfig:
    """Load the contract schema from a YAML path or a mapping; missing keys take defaults.

    Top-level keys are model/workload/system/plan and an exported file's `ipu_tune:` provenance
    block (ignored, so exports evaluate again unchanged); any other key is refused. A YAML file
    naming `model._target_` is refused unless `trust_remote_code` (the file's author chose the
    code to run, not the user).
    """
    if isinstance(source, EvalConfig):
        data: Mapping[str, Any] = to_plain_dict(source)
    elif isinstance(source, str | Path):
        data = _read_yaml(Path(source))
        if not trust_remote_code:
            check_trusted(data, f"config file {str(source)!r}")
    elif isinstance(source, DictConfig):
        data = OmegaConf.to_container(source, resolve=True)  # type: ignore[assignment]
    elif isinstance(source, Mapping):
        data = source
    else:
        raise IpuTuneError(
            f"config: expected a YAML path or a mapping, got {type(source).__name__}"
        )
    sections = {f.name for f in dataclasses.fields(EvalConfig)}
    for key in data:
        if key not in sections and key != PROVENANCE_KEY:
            raise IpuTuneError(
                f"{key}: unknown top-level key; allowed: {', '.join(sorted(sections))}, "
                f"{PROVENANCE_KEY}"
            )
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
