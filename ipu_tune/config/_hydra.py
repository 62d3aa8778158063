"""Hydra side of the schema: the ConfigStore node `conf/config.yaml` builds on, and paths."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from ipu_tune.config._schema import TuneConfig, check_switch, loose_switches, switch_keys
from ipu_tune.config._shapes import check_override_shape
from ipu_tune.config._yaml import MAX_YAML_DEPTH
from ipu_tune.errors import IpuTuneError, bad_value, shorten

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

__all__ = [
    "CONF_DIR",
    "GROUPS",
    "SPACES_DIR",
    "check_override_text",
    "check_sweep",
    "group_options",
    "parse_overrides",
    "register",
    "split_hydra_args",
    "sweep_values",
]

_PKG = Path(__file__).resolve().parent.parent
CONF_DIR = _PKG / "conf"
SPACES_DIR = _PKG / "search_spaces"
GROUPS = ("model", "system", "search", "sampler", "experiment")


def register() -> None:
    """Store the schema node `conf/config.yaml` builds on; call before composing with Hydra.

    Not done at import: Hydra costs ~0.8 s to import and only composing needs it (the CLI's
    tuning command, tests and benchmarks that compose call this; `ipu_tune.config` also calls
    it on import when Hydra is already imported)."""
    from hydra.core.config_store import ConfigStore

    # The schema with its switches untyped: `typed` checks them on the composed config.
    ConfigStore.instance().store(name="tune_schema", node=loose_switches(TuneConfig))


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


# Python refuses to read longer digit strings as an int; Hydra's grammar and OmegaConf recurse
# once per bracket (RecursionError near 150 levels). Overrides get the limits files have.
_MAX_DIGITS = 4300
_NAME_MAX = 255  # a file name's limit: Hydra stats <conf>/<key> for every override key
_LONG_NUMBER = re.compile(f"[0-9]{{{_MAX_DIGITS + 1}}}")


def check_override_text(text: str) -> None:
    """One line for an override no reader of overrides can take: an integer of over 4300
    digits, brackets nested deeper than 50 levels (as in files), or a key Hydra cannot look up
    as a group's folder (a name over 255 bytes). Checked on the text, before Hydra's grammar,
    OmegaConf or `int()` see it."""
    key, _, value = text.partition("=")
    group = key.lstrip("+~").partition("@")[0]
    longest = max((len(p.encode("utf-8", "surrogateescape")) for p in group.split("/")),
                  default=0)
    if longest > _NAME_MAX:  # Hydra looks each key up as a folder: ENAMETOOLONG, a traceback
        raise IpuTuneError(f"{shorten(key)}: a key of {len(group)} characters; allowed: keys "
                           f"of the schema (ipu-tune --help), at most {_NAME_MAX} bytes "
                           "between slashes")
    shown = value if len(value) <= 60 else value[:60] + "..."
    control = next((c for c in text if c.isprintable() is False and c != " "), None)
    if control is not None:  # no quoting keeps it: a one-line message would show another value
        raise IpuTuneError(f"{shorten(key)}={shorten(repr(value))}: holds a control character "
                           f"({control!a}); allowed: printable characters only")
    if _LONG_NUMBER.search(value):
        raise bad_value(key, shown, f"a number of over {_MAX_DIGITS} digits; allowed: "
                        f"numbers of at most {_MAX_DIGITS} digits")
    depth = 0
    for char in value:
        if char in "[{(":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise bad_value(key, shown, f"nested deeper than {MAX_YAML_DEPTH} levels; "
                                f"allowed: at most {MAX_YAML_DEPTH} levels of [ ] {{ }} ( )")
        elif char in "]})":
            depth = max(depth - 1, 0)


def parse_overrides(overrides: Sequence[str]) -> list[Override]:
    """Hydra's `Override`s of `overrides`. One its grammar cannot read is named with how to
    quote it (a storage URL's `?password=`, a value with spaces), in one line; the callers'
    error printer redacts credentials."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed: list[Override] = []
    for text in overrides:
        check_override_text(text)
        try:
            parsed += parser.parse_overrides([text])
        except HydraException as exc:
            why = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            key, eq, value = text.partition("=")
            quoted = f"'{key}=\"{value}\"'" if eq else "key=value"
            raise IpuTuneError(
                f"{text!r}: Hydra's override grammar cannot read it ({why}); allowed: key=value, "
                f"a value holding = ? [ ] {{ }} , quotes or spaces in quotes: {quoted}") from None
    for o, text in zip(parsed, overrides, strict=True):
        if not o.key_or_group:  # `=1`: Hydra reads a group of no name (a bare ValueError)
            raise IpuTuneError(f"{text!r}: no key before =; allowed: key=value")
        if o.is_delete():
            _check_deletion(o.key_or_group)
            continue
        values = sweep_values(o, text)
        for value in values if o.key_or_group not in GROUPS else ():
            check_override_shape(o.key_or_group, value)  # OmegaConf's words name neither
        if o.key_or_group in switch_keys(TuneConfig):
            for value in values:  # OmegaConf would read 2, "yes" or "on" as true
                check_switch(o.key_or_group, value)
        if o.key_or_group in GROUPS:
            _check_group_value(o.key_or_group, values)
    return parsed


def _check_deletion(key: str) -> None:
    """`~key` of the schema (a section, a group or a key): Hydra drops it and the schema's
    defaults take its place unseen. Keys inside a free mapping (`model.kwargs.NAME`) may go."""
    node: Any = TuneConfig
    for part in key.split("."):
        fields = {f.name: f for f in dataclasses.fields(node)} if dataclasses.is_dataclass(
            node) else {}
        if part not in fields:
            return  # not the schema's (Hydra or OmegaConf say what it is)
        node = get_type_hints(node).get(part)
    if key in GROUPS:
        allowed = f"{key}=OPTION, one of {', '.join(group_options(key))}"
    else:
        allowed = f"{key}.KEY=VALUE" if dataclasses.is_dataclass(node) else f"{key}=VALUE"
    raise IpuTuneError(f"~{key}: deletion is not allowed (every key of the schema has a "
                       f"value); allowed: {allowed}")


def _check_group_value(group: str, values: list[Any]) -> None:
    """A config group's option is a name: Hydra raises a bare ValueError (a traceback) on
    `model=null`, and reads `model=[a,b]` as two options of one group."""
    for value in values:
        if not isinstance(value, str):
            shown = "null" if value is None else str(value)
            raise IpuTuneError(f"{group}={shown}: allowed: one option by name, one of "
                               f"{', '.join(group_options(group))}")


MAX_SWEEP_VALUES = 1000
_SWEEP_FORMS = "a,b,c, choice(a,b), range(start,stop[,step])"


def sweep_values(o: Override, text: str) -> list[Any]:
    """The values of override `o` (`text` as typed): its one value, or each of a sweep's. One
    line, not a traceback, for what Hydra cannot list: `glob()` and `interval()` (which need
    its sweeper), a range with step 0 (Python's ValueError), one of no value, and more than
    `MAX_SWEEP_VALUES` (listing `range(0,10**12)` would never end)."""
    from hydra.errors import HydraException

    if not o.is_sweep_override():
        return [o.value()]
    value: Any = o.value()
    if o.is_interval_sweep() or type(value).__name__ == "Glob":
        raise IpuTuneError(f"{text!r}: Hydra's basic sweeper cannot list these values; "
                           f"allowed: {_SWEEP_FORMS}")
    if o.is_range_sweep():
        if not value.step:
            raise IpuTuneError(f"{text!r}: a range of step 0; allowed: a step other than 0")
        count = math.ceil((value.stop - value.start) / value.step)
        if count > MAX_SWEEP_VALUES:
            raise IpuTuneError(f"{text!r}: {count} values; allowed: at most "
                               f"{MAX_SWEEP_VALUES} values in one sweep")
    try:
        values = list(itertools.islice(o.sweep_iterator(), MAX_SWEEP_VALUES + 1))
    except (HydraException, ValueError) as exc:
        raise IpuTuneError(f"{text!r}: {str(exc).splitlines()[0]}; allowed: {_SWEEP_FORMS}"
                           ) from None
    if not values or len(values) > MAX_SWEEP_VALUES:
        raise IpuTuneError(f"{text!r}: {len(values) or 'no'} values; allowed: 1 to "
                           f"{MAX_SWEEP_VALUES} values, {_SWEEP_FORMS}")
    return values


_SHELLS = ("bash", "fish", "zsh")
_COMPLETION = ("install", "uninstall", "query")


def split_hydra_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Hydra's flags, each with its value, and the overrides) of a command line, read as
    Hydra's own parser reads them: `--cfg job` is a flag and its value, not the override `job`,
    and a flag after the overrides (`x=1 -m`) is a flag. A flag Hydra does not know, a value
    it does not take or a missing one is one line."""
    from hydra._internal.utils import get_args_parser

    actions = get_args_parser()._option_string_actions
    flags: list[str] = []
    overrides: list[str] = []
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            overrides.append(arg)
            continue
        name, eq, value = arg.partition("=")
        action = actions.get(name)
        if action is None:
            raise IpuTuneError(f"{arg}: unknown flag; allowed: ipu-tune --help, Hydra's "
                               f"{', '.join(sorted(actions))}")
        flags.append(arg)
        if eq or action.nargs == 0:
            pass
        elif rest and not rest[0].startswith("-") and (action.nargs != "?" or "=" not in rest[0]):
            value = rest.pop(0)
            flags.append(value)
        elif action.nargs == "?":
            # Its value written out (`--info all`): the flags go before the overrides, where
            # argparse would take the next override (`model=x --info`) as the flag's value.
            flags.append(action.const)
        else:
            raise IpuTuneError(f"{name}: expects a value; allowed: {name} "
                               f"{'|'.join(action.choices) if action.choices else 'VALUE'}")
        if value and action.choices and value not in action.choices:
            raise bad_value(name, value, f"allowed: {', '.join(action.choices)}", action.choices)
    given = {f.partition("=")[0] for f in flags}
    if {"-sc", "--shell-completion"} & given:
        _check_completion(overrides)
    _check_modes(given, actions)
    return flags, overrides


# What Hydra does instead of running the task once; it takes one of them (a bare ValueError
# otherwise), unless --help prints its help first.
_MODES = ("--run", "--multirun", "--cfg", "--info", "--shell-completion")


def _check_modes(given: set[str], actions: dict[str, Any]) -> None:
    modes = [m for m in _MODES if {m, *actions[m].option_strings} & given]
    if len(modes) > 1 and not {"-h", "--help", "--hydra-help"} & given:
        raise IpuTuneError(f"{' '.join(modes)}: Hydra takes only one of them; allowed: one "
                           f"of {', '.join(_MODES)}")


def _check_completion(overrides: list[str]) -> None:
    """Hydra's `--shell-completion` takes one of install=SHELL, uninstall=SHELL, query=SHELL
    (Hydra raises a bare ValueError otherwise)."""
    verbs = [o.partition("=") for o in overrides]
    if len(verbs) != 1 or verbs[0][0] not in _COMPLETION or verbs[0][2] not in _SHELLS:
        given = repr(" ".join(overrides)) if overrides else "alone"
        raise IpuTuneError(f"--shell-completion {given}: allowed: one of install=SHELL, "
                           f"uninstall=SHELL, query=SHELL with SHELL one of {', '.join(_SHELLS)}")


def check_sweep(override: Override, text: str, multirun: bool, command: str = "") -> None:
    """A sweep (`a,b`, `range()`, `choice()`) only where it runs: under -m of the tuner, with
    the values Hydra's basic sweeper can list (not `interval()`, which needs a sweeper plugin,
    nor `glob()`, which Hydra resolves only inside its own sweep); one line, not Hydra's
    "Ambiguous value" or an OmegaConf validation error."""
    if not override.is_sweep_override():
        return
    quote = f"quote a value holding commas: '{override.key_or_group}=\"a,b\"'"
    if command:
        raise IpuTuneError(f"{text!r}: several values are a sweep; {command} takes one value per "
                           f"key; {quote}")
    if not multirun:
        raise IpuTuneError(f"{text!r}: several values are a sweep; allowed: run the sweep with "
                           f"-m (ipu-tune -m {text}), or {quote}")
    if override.is_interval_sweep() or type(override.value()).__name__ == "Glob":
        raise IpuTuneError(f"{text!r}: Hydra's basic sweeper cannot list these values; allowed "
                           "with -m: a,b,c, choice(a,b), range(start,stop[,step])")
    from hydra.core.override_parser.types import Sweep

    if any(isinstance(v, Sweep) for v in getattr(override.value(), "list", ())):
        # `range(1,3),8`: Hydra's sweeper fails on it with a traceback of OmegaConf's.
        raise IpuTuneError(f"{text!r}: a sweep among a sweep's values; allowed with -m: one "
                           "form per key, a,b,c, choice(a,b) or range(start,stop[,step])")
