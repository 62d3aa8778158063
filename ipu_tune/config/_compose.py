"""Composing the tuning config from command-line overrides: Hydra's way, and a quick way.

`compose` is Hydra's composition of `conf/config.yaml` (one `IpuTuneError` line on a bad
override). `quick_compose` gives the same config without importing Hydra for the common single
run: group choices by name and plain `key=value` overrides. It starts from Hydra's composition
of those group choices, cached on disk per state of conf/ and of the schema, and sets the
overridden keys on it (Hydra also applies command-line values after the defaults tree); it
returns None for anything else (`~`, a new `+` key, a list, a quoted or interpolated value, a
sweep, a Hydra flag), which Hydra then composes. tests/cli/test_quick_compose.py checks both
give the same config.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ipu_tune.config._hydra import (
    CONF_DIR,
    GROUPS,
    check_override_text,
    parse_overrides,
    register,
)
from ipu_tune.config._load import to_plain_dict, typed
from ipu_tune.config._messages import composition_error, omegaconf_error
from ipu_tune.config._schema import TuneConfig
from ipu_tune.config._sources import guarded_loads
from ipu_tune.config._trust import trusted_composition
from ipu_tune.errors import IpuTuneError, shorten
from ipu_tune.files import atomic_write

__all__ = ["compose", "compose_raw", "hydra_error", "quick_compose"]

# Hydra's wording of an override it cannot apply -> what to type instead.
_NO_DEFAULT = re.compile(r"Could not override '([\w/.]+)'\. No match in the defaults list")
_BLOCKED = re.compile(r"Target '([^']*)'.* is blocklisted")
_FULL_KEY = re.compile(r"full_key: (\S+)")
_ALREADY = re.compile(r"Could not append to config\. An item is already at '([^']+)'")


def hydra_error(exc: Exception, overrides: Sequence[str] = ()) -> IpuTuneError:
    """One line for an error of Hydra's composition (OmegaConf's, or Hydra's own first line),
    with what to type instead where Hydra does not say it; `overrides` (the command line's)
    give the value of an override Hydra names only by its key."""
    from omegaconf.errors import OmegaConfBaseException

    cause = exc.__cause__
    if isinstance(exc, OmegaConfBaseException):
        return omegaconf_error(exc, overrides)
    if isinstance(cause, OmegaConfBaseException):
        return omegaconf_error(cause, overrides)
    composing = composition_error(str(exc))
    if composing is not None:
        return composing
    blocked = _BLOCKED.search(str(exc))
    if blocked:  # Hydra's sentence runs over four lines; its first named neither key nor rule
        key = _FULL_KEY.search(str(exc))
        return IpuTuneError(
            f"{key.group(1) if key else '_target_'}={blocked.group(1)!r}: Hydra refuses to "
            "instantiate it (its blocklist: it lets config data run code); allowed: "
            "model._target_ only, a torch.nn.Module or a factory of one outside the standard "
            "library")
    line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    found = _NO_DEFAULT.search(line)
    if found:
        group = found.group(1)
        return IpuTuneError(f"{group}=...: {group} has no default to override; allowed: "
                            f"+{group}=NAME adds one (e.g. +experiment=seed_mnist)")
    found = _ALREADY.search(line)
    if found:
        return _already_set(found.group(1), overrides)
    return IpuTuneError(line)


def _already_set(key: str, overrides: Sequence[str]) -> IpuTuneError:
    """`+key=value` of a key a preset or file already sets: Hydra names the key only."""
    given = next((o for o in overrides if o.partition("=")[0] == f"+{key}"), f"+{key}=VALUE")
    return IpuTuneError(shorten(
        f"{given}: {key} is already set (by its preset or a config file) and + only adds a "
        f"key; allowed: drop the + to set it ({given[1:]}; its value is checked as usual), or "
        f"write ++"))


def compose_raw(overrides: list[str], conf_dir: Path = CONF_DIR) -> Any:
    """Hydra's composition of `overrides` (a DictConfig); errors as one `IpuTuneError` line."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register()
    parse_overrides(overrides)  # the checks Hydra's composition would skip (`_hydra`)
    GlobalHydra.instance().clear()
    try:
        with guarded_loads(conf_dir), initialize_config_dir(version_base="1.3",
                                                            config_dir=str(conf_dir)):
            return hydra_compose(config_name="config", overrides=overrides)
    except (OmegaConfBaseException, HydraException) as exc:
        raise hydra_error(exc, overrides) from None
    finally:
        GlobalHydra.instance().clear()


def compose(overrides: list[str], conf_dir: Path = CONF_DIR) -> TuneConfig:
    """The typed config Hydra composes from `overrides`."""
    return typed(TuneConfig, compose_raw(overrides, conf_dir))


_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Values Hydra's override grammar reads the same way as here (anything else: Hydra composes).
_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"[+-]?(0|[1-9][0-9]*)\.[0-9]+$")
_WORD = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*$")
_NOT_WORDS = {"inf", "nan", "true", "false", "null"}
_MISSING = object()


def _plain_value(text: str) -> Any:
    """The value Hydra's grammar gives an unquoted `text`, or `_MISSING` when it is not one of
    the plain forms handled here (bool, null, int, decimal float, a word or path)."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if _WORD.match(text) and low not in _NOT_WORDS:
        return text
    return _MISSING


def _state_key(conf_dir: Path) -> str:
    """What the composition of the defaults depends on: conf/, the schema, Hydra, OmegaConf."""
    h = hashlib.sha256(b"ipu-tune compose 1\0")
    for path in sorted(conf_dir.rglob("*.yaml")):
        h.update(str(path.relative_to(conf_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    pkg = Path(__file__).resolve().parent.parent
    for path in (pkg / "config" / "_schema.py", pkg / "knobs.py"):
        h.update(path.read_bytes() + b"\0")
    for name in ("hydra", "omegaconf"):  # their version, without importing them
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin else None
        h.update(f"{name}:{origin}:{st.st_mtime_ns if st else 0}\0".encode())
    return h.hexdigest()[:32]


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "${" in node


def _write_cache(path: Path, plain: dict[str, Any]) -> None:
    # A cache: a folder that cannot be written only costs the next run its speed.
    with contextlib.suppress(IpuTuneError, TypeError, ValueError):
        atomic_write(path, json.dumps(plain), key="compose cache")


def _group_composition(groups: list[str], conf_dir: Path, cache: Path) -> dict[str, Any] | None:
    """Hydra's composition of conf/config.yaml with the group choices `groups` only, as plain
    containers; cached in the folder `cache` (a file per state of conf/ and the schema and per
    list of choices). None when the composition holds an interpolation (a key set later could
    change what it resolves to) or fails (Hydra then words the error)."""
    key = hashlib.sha256("\0".join([_state_key(conf_dir), *groups]).encode()).hexdigest()[:32]
    path = cache / f"compose-{key}.json"
    try:  # an edited file cannot move where files go: checked against conf_dir's own
        found = trusted_composition(json.loads(path.read_text()), conf_dir)
        if found is not None:
            return found
    except (OSError, ValueError, IpuTuneError):
        pass
    from omegaconf import OmegaConf

    try:
        composed = compose_raw(groups, conf_dir)
        if _has_interpolation(OmegaConf.to_container(composed, resolve=False)):
            return None
        plain = to_plain_dict(typed(TuneConfig, composed))
    except IpuTuneError:
        return None
    _write_cache(path, plain)
    return plain


def _is_group_choice(key: str) -> bool:
    """`model=...`, `+experiment=...`: a config group's option chosen by name."""
    return key == "+experiment" or (key in GROUPS and key != "experiment")


def _split(argv: Sequence[str]) -> tuple[list[str], list[tuple[list[str], Any]]] | None:
    """(group choices, (key path, value) edits) of `argv`; None when Hydra must compose."""
    groups: list[str] = []
    edits: list[tuple[list[str], Any]] = []
    for arg in argv:
        check_override_text(arg)  # before int(): Python refuses over 4300 digits
        key, eq, text = arg.partition("=")
        if eq and _is_group_choice(key) and _WORD.match(text):
            groups.append(arg)
            continue
        value = _plain_value(text) if eq else _MISSING
        if (value is _MISSING or not _KEY.match(key) or key in GROUPS
                or key.split(".")[0] == "hydra"):
            return None  # a flag, +/~, a sweep, a list, a quoted string ...
        edits.append((key.split("."), value))
    return groups, edits


def quick_compose(argv: Sequence[str], cache: Path,
                  conf_dir: Path = CONF_DIR) -> TuneConfig | None:
    """The config of a single run whose arguments are group choices by name (`model=bert_base`,
    `+experiment=seed_resnet101`) and plain `a.b=value` overrides of keys the composition of
    those groups has (see the module docstring); the groups' composition is cached in the
    folder `cache`. None when Hydra must compose, also when the result would be an error:
    Hydra words it."""
    split = _split(argv)
    if split is None:
        return None
    groups, edits = split
    plain = _group_composition(groups, conf_dir, cache)
    if plain is None:
        return None
    for parts, value in edits:
        node: Any = plain
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node or isinstance(
                node[parts[-1]], dict | list):
            return None
        node[parts[-1]] = value
    try:
        return typed(TuneConfig, plain)
    except IpuTuneError:
        return None
