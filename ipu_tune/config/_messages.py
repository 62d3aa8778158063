"""OmegaConf's and Hydra's errors as our one line: the key, the value and what is allowed.

OmegaConf words a wrong type as "Value '1.5' of type 'float' could not be converted to
Integer" and Hydra wraps it over several lines when a file of a `--config-dir` holds it (the
first line, all that used to be shown, named neither the key nor the value).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ipu_tune.errors import IpuTuneError

if TYPE_CHECKING:
    from omegaconf.errors import OmegaConfBaseException

__all__ = ["GIVEN_OVERRIDES", "composed_name", "composition_error", "omegaconf_error"]

_KINDS = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false"}
# (pattern of OmegaConf's message, what the key takes); group 1 is the value when there is one.
_TYPE_ERRORS = (
    (re.compile(r"Value '(.*)' of type '\w+' could not be converted to (\w+)"), ""),
    (re.compile(r"Value '(.*)' is not a valid bool"), "true or false"),
    (re.compile(r"Cannot convert '\w+' to string: '(.*)'"), "a string"),
    (re.compile(r"Invalid value assigned: (\w+) is not a ListConfig"), "a list, e.g. [a, b]"),
)
# Mappings whose keys are the user's: a key their preset does not set is added with `+`.
_FREE = ("model.kwargs.", "model.hf.config.", "sampler.params.")
_COMPOSING = re.compile(r"In '([^']+)': \w+ raised while composing config:")
_FULL_KEY = re.compile(r"^\s*full_key: (\S+)", re.M)
_UNSET_ENV = re.compile(r"Environment variable '([^']*)' not found")


# The command line's overrides of the command being read (`omegaconf_error` echoes a value
# as typed there): set by a reader that merges them into a config file (`evaluate`) or
# composes a sweep's jobs (their values as Hydra spells them: 1e3 as 1000.0).
GIVEN_OVERRIDES: ContextVar[Sequence[str]] = ContextVar("given_overrides", default=())


def _typed(key: str, msg: str, given: Sequence[str]) -> str | None:
    for pattern, allowed in _TYPE_ERRORS:
        found = pattern.search(msg)
        if found is None:
            continue
        if not allowed:
            allowed = _KINDS.get(found.group(2), found.group(2).lower())
        if "Invalid value assigned" in msg:
            return f"{key}: a {found.group(1)}; allowed: {allowed}"
        # The value as the command line gave it (1e3, which OmegaConf shows as '1000.0'): of
        # the key's values given, the one OmegaConf refused.
        typed = [text for text in _values(given) if _as_read(text) == found.group(1)]
        interpolated = [text for text in given if "${" in text]
        if not typed and interpolated:
            # `${oc.env:NAME}` of a variable set to something else (a mistyped name may be a
            # password's): the override as typed, not what it resolved to.
            return (f"{key}={interpolated[0]}: what it resolves to (not shown) is not "
                    f"{allowed}; allowed: {allowed}")
        if not typed and found.group(1) in ("True", "False") and allowed != _KINDS["Boolean"]:
            # A file's `yes`, `on` or `true`: YAML made it a boolean before OmegaConf saw it.
            return (f"{key}={found.group(1)}: allowed: {allowed} (YAML reads an unquoted "
                    "yes/no/on/off/true/false as a boolean)")
        value = typed[0] if typed else repr(found.group(1))
        return f"{key}={value}: allowed: {allowed}"
    return None


def _unset_variable(key: str, msg: str, given: Sequence[str]) -> str | None:
    """OmegaConf's `${oc.env:NAME}` of a variable the environment does not set."""
    found = _UNSET_ENV.search(msg)
    if found is None:
        return None
    name = found.group(1)
    value = f"={given[0]}" if given else ""
    return (f"{key}{value}: the environment variable {name} is not set; allowed: set it, or "
            f"give a default, ${{oc.env:{name},DEFAULT}}")


def _values(given: Sequence[str]) -> list[str]:
    """The values given: each override's, and each of a `-m` sweep's `a,b` (the value refused
    is one of them)."""
    values = []
    for text in given:
        values.append(text)
        if "," in text and text[:1] not in "[{(":
            values.extend(part.strip() for part in text.split(","))
    return values


def _as_read(text: str) -> str:
    """An override's value as OmegaConf's message shows it (`1e3` as 1000.0, `true` as
    True, `[1,2]` as [1, 2]): Hydra's grammar reads those case-insensitively."""
    if text.lower() in ("true", "false"):
        return text.capitalize()
    if text.startswith("[") and text.endswith("]"):  # a flat list, as Python shows it
        return "[" + ", ".join(_element(t.strip()) for t in text[1:-1].split(",") if t) + "]"
    for kind in (int, float):
        try:
            return str(kind(text))
        except ValueError:
            pass
    return text


def _element(text: str) -> str:
    """A list element as Python shows it: a string quoted."""
    if text.lower() in ("true", "false", "null"):
        return "None" if text.lower() == "null" else text.capitalize()
    for kind in (int, float):
        try:
            return str(kind(text))
        except ValueError:
            pass
    return repr(text.strip("'\""))


def omegaconf_error(exc: OmegaConfBaseException, overrides: Sequence[str] = ()) -> IpuTuneError:
    """One line from an OmegaConf merge/validation error: the full key, the value (as
    `overrides`, the command line's, gave it when one sets the key), the rule."""
    key = getattr(exc, "full_key", None) or ""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # The command line as typed first: `overrides` may be a sweep's job, as Hydra spells it.
    given = [text.partition("=")[2] for text in (*GIVEN_OVERRIDES.get(), *overrides)
             if key and text.partition("=")[0].lstrip("+~") == key]
    return IpuTuneError(_message(key, msg, given))


def _message(key: str, msg: str, given: Sequence[str] = ()) -> str:
    if "not in" in msg and "Key '" in msg:
        if key.startswith(_FREE):
            return (f"{key}: not set by the preset, so not overridden; allowed: +{key}=VALUE "
                    "adds it")
        from ipu_tune.config._known_keys import unknown_key_message

        return unknown_key_message(key) or f"{key}: unknown key ({msg})"
    if "does not support deletion" in msg:  # `~key` of a structured config
        return (f"~{key}: deletion is not allowed (every key of the schema has a value); "
                f"allowed: {key}=VALUE")
    typed = (_typed(key, msg, given) or _unset_variable(key, msg, given)) if key else None
    if typed is not None:
        return typed
    return f"{key}: {msg}" if key else msg


def composed_name(text: str) -> str | None:
    """The config file Hydra's error of composing it names (`experiment/x`), else None."""
    found = _COMPOSING.match(text.strip())
    return found.group(1) if found else None


def composition_error(text: str) -> IpuTuneError | None:
    """Hydra's "In 'experiment/x': ValidationError raised while composing config:" and the
    lines below it as one line naming the file, the key and the value; None for other text."""
    found = _COMPOSING.match(text.strip())
    lines = text.strip().splitlines()
    if found is None or len(lines) < 2:
        return None
    key = _FULL_KEY.search(text)
    return IpuTuneError(f"{found.group(1)}: " + _message(key.group(1) if key else "",
                                                         lines[1].strip()))
