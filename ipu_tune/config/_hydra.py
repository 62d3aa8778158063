"""Hydra side of the schema: the ConfigStore node `conf/config.yaml` builds on, and paths."""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_store import ConfigStore

from ipu_tune.config._schema import TuneConfig

__all__ = ["CONF_DIR", "GROUPS", "SPACES_DIR", "group_options", "register"]

_PKG = Path(__file__).resolve().parent.parent
CONF_DIR = _PKG / "conf"
SPACES_DIR = _PKG / "search_spaces"
GROUPS = ("model", "system", "search", "sampler", "experiment")


def register() -> None:
    ConfigStore.instance().store(name="tune_schema", node=TuneConfig)


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
