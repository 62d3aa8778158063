"""Profiles shared by the simulator tests (traced once per session by the real profiler)."""

from __future__ import annotations

import pytest

from ipu_tune.config import ModelConfig
from ipu_tune.hardware import System, make_system
from ipu_tune.models import ModelProfile, profile_model


@pytest.fixture(scope="session")
def resnet101() -> ModelProfile:
    return profile_model(ModelConfig(name="resnet101", input_shape=[3, 64, 64], num_classes=10))


@pytest.fixture(scope="session")
def resnet50() -> ModelProfile:
    return profile_model(ModelConfig(name="resnet50", input_shape=[3, 224, 224], num_classes=1000))


@pytest.fixture(scope="session")
def mk2x2() -> System:
    return make_system("mk2", 2)
