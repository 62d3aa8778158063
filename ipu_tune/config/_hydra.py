"""Hydra side of the schema: the ConfigStore node `conf/config.yaml` builds on, and paths."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ipu_tune.config._schema import TuneConfig
from ipu_tune.errors import IpuTuneError

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

__all__ = ["CONF_DIR", "GROUPS", "SPACES_DIR", "group_options", "parse_overrides", "register"]

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

    ConfigStore.instance().store(name="tune_schema", node=TuneConfig)


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def parse_overrides(overrides: Sequence[str]) -> list[Override]:
    """Hydra's `Override`s of `overrides`. One its grammar cannot read is named with how to
    quote it (a storage URL's `?password=`, a value with spaces), in one line; the callers'
    error printer redacts credentials."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed: list[Override] = []
    for text in overrides:
        try:
            parsed += parser.parse_overrides([text])
        except HydraException as exc:
            why = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            key, eq, value = text.partition("=")
            quoted = f"'{key}=\"{value}\"'" if eq else "key=value"
            raise IpuTuneError(
                f"{text!r}: Hydra's override grammar cannot read it ({why}); allowed: key=value, "
                f"a value holding = ? [ ] {{ }} , quotes or spaces in quotes: {quoted}") from None
    return parsed
