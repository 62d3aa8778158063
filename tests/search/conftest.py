"""Fixtures of the search tests."""

from __future__ import annotations

import pytest

from ipu_tune.config import TuneConfig
from tests.search._helpers import compose_cfg


@pytest.fixture(scope="session")
def seed_cfg() -> TuneConfig:
    """The seed session's starting point (+experiment=seed_resnet101), default presets."""
    return compose_cfg("+experiment=seed_resnet101")
