"""A value of the wrong shape for its key, named before OmegaConf sees it: null where the
schema takes a value, a mapping or a number where it takes a list, a list or a number where it
takes a section or a mapping, null or a container inside a list of numbers or names.

OmegaConf words these without the key or the value ("Cannot merge DictConfig with ListConfig",
"Merge error: list is not a subclass of PipelineConfig", "field ... is not Optional", "a
AnyNode"), or merges a container into a typed list. The command line (`check_override_shape`),
files and mappings (`check_shapes`) and Hydra's composition of a config folder (`kind_of`, for
OmegaConf's own message) all word them here: the key, the value and what the key takes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from ipu_tune.errors import IpuTuneError, bad_value

__all__ = ["check_file_shapes", "check_override_shape", "check_shapes", "kind_of"]

_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
_INDEX = re.compile(r"\[\d+\]$")


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(the type, whether null is allowed) of a schema annotation."""
    if get_origin(hint) is Union:
        args = [a for a in get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(get_args(hint))
    return hint, False


@cache
def _fields(schema: type) -> dict[str, tuple[Any, bool]]:
    hints = get_type_hints(schema)
    return {f.name: _unwrap(hints[f.name]) for f in dataclasses.fields(schema)}


def _kind(hint: Any, optional: bool = False) -> str:
    """What a key of type `hint` takes, in words."""
    if dataclasses.is_dataclass(hint):
        names = ", ".join(_fields(hint))  # type: ignore[arg-type]
        text = f"a mapping of its keys ({names})"
    elif get_origin(hint) is list:
        item = get_args(hint)[0]
        text = f"a list of {getattr(item, '__name__', 'any')} values, e.g. [a, b]"
    elif get_origin(hint) is dict:
        text = "a mapping (KEY: VALUE)"
    else:
        text = _WORDS.get(hint, "a value")
    return text + (", or null" if optional else "")


def _schema_hint(key: str) -> tuple[Any, bool] | None:
    """(type, optional) of a dotted key of the tuning schema (`plan.pipeline.splits`, or an item
    `plan.pipeline.splits[0]`); None for a key it has not (Hydra's, a free mapping's)."""
    from ipu_tune.config._schema import TuneConfig

    item = _INDEX.search(key)
    node: Any = TuneConfig
    found: tuple[Any, bool] | None = None
    for part in _INDEX.sub("", key).split("."):
        if not dataclasses.is_dataclass(node) or part not in _fields(node):  # type: ignore[arg-type]
            return None
        found = _fields(node)[part]  # type: ignore[arg-type]
        node = found[0]
    if found is not None and item is not None:
        args = get_args(found[0]) if get_origin(found[0]) is list else ()
        return (args[0], False) if args else None
    return found


def kind_of(key: str) -> str | None:
    """What the tuning schema's `key` takes, in words (None: not a key of the schema)."""
    hint = _schema_hint(key)
    return None if hint is None else _kind(*hint)


def _is_text(value: Any) -> bool:
    """An interpolation or OmegaConf's missing marker: OmegaConf resolves and words those."""
    return isinstance(value, str) and ("${" in value or value == "???")


def _problem(hint: Any, optional: bool, value: Any) -> bool:
    """Is `value` of another shape than a key of type `hint` takes?"""
    if hint is Any or _is_text(value):
        return False
    if value is None:
        return not optional
    if dataclasses.is_dataclass(hint) or get_origin(hint) is dict:
        return not isinstance(value, Mapping)
    if get_origin(hint) is list:
        if not isinstance(value, list | tuple):
            return True
        item = get_args(hint)[0]
        return item in _WORDS and any(v is None or isinstance(v, list | tuple | Mapping)
                                      for v in value)
    return False  # a scalar's other values: OmegaConf converts them or names them itself


def _error(key: str, hint: Any, optional: bool, value: Any) -> IpuTuneError:
    allowed = f"allowed: {_kind(hint, optional)}"
    if value is None:
        return IpuTuneError(f"{key}=null: {allowed}")
    return bad_value(key, list(value) if isinstance(value, tuple) else value, allowed)


def check_override_shape(key: str, value: Any) -> None:
    """A command-line value of the wrong shape for the schema's `key`, in one line."""
    hint = _schema_hint(key)
    if hint is not None and _problem(*hint, value):
        raise _error(key, *hint, value)


def check_shapes(schema: type, data: Any, path: str = "") -> None:
    """Every value of the mapping `data` (a file, a mapping, a composition) of the shape its
    key of `schema` takes, recursively into sections; unknown keys are left to the caller."""
    if not isinstance(data, Mapping):
        return
    fields = _fields(schema)
    for name, value in data.items():
        if name not in fields:
            continue
        hint, optional = fields[name]
        key = f"{path}.{name}" if path else str(name)
        if _problem(hint, optional, value):
            raise _error(key, hint, optional, value)
        if dataclasses.is_dataclass(hint):
            check_shapes(hint, value, key)  # type: ignore[arg-type]


def check_file_shapes(data: Any, package: str, where: str) -> None:
    """`check_shapes` of a config folder's file, whose keys Hydra places at `package` (""
    for `# @package _global_`); `where` (the file) begins the message."""
    from ipu_tune.config._schema import TuneConfig

    hint = (TuneConfig, False) if not package else _schema_hint(package)
    if hint is None or not dataclasses.is_dataclass(hint[0]):
        return
    try:
        check_shapes(hint[0], data, package)
    except IpuTuneError as exc:
        raise IpuTuneError(f"{where}: {exc}") from None
