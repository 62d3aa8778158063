from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ipu_tune.config import ModelConfig
from ipu_tune.config._load import typed
from ipu_tune.models import ModelProfile, profile_model

CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def conf(name: str) -> dict[str, Any]:
    """The `model:` mapping of conf/model/<name>.yaml (under `model:` in a preset that also
    sets the workload, `# @package _global_`)."""
    text = (CONF_MODEL / f"{name}.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    if "# @package _global_" in text:
        data = data["model"]
    return data


def model_cfg(**fields: Any) -> ModelConfig:
    return typed(ModelConfig, fields)


@pytest.fixture(scope="session")
def profile_of() -> Any:
    """profile_model of a `model:` mapping (cached in process across tests)."""

    def get(**fields: Any) -> ModelProfile:
        return profile_model(model_cfg(**fields))

    return get
