"""Hydra side of the schema: the ConfigStore node `conf/config.yaml` builds on, and paths."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.config._schema import TuneConfig

__all__ = ["CONF_DIR", "GROUPS", "SPACES_DIR", "group_options", "register"]

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
