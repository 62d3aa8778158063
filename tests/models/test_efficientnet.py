"""EfficientNet-B0..B4: torchvision's parameter counts, module names and blocks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.models.conftest import conf

# torchvision.models.efficientnet_bN(): parameters listed in its weight tables (IMAGENET1K_V1).
PARAMETERS = {0: 5_288_548, 1: 7_794_184, 2: 9_109_994, 3: 12_233_232, 4: 19_341_616}


@pytest.mark.parametrize("variant", sorted(PARAMETERS))
def test_efficientnet_has_torchvisions_parameter_count(profile_of: Any, variant: int) -> None:
    profile = profile_of(**conf(f"efficientnet_b{variant}"))
    assert profile.parameters == PARAMETERS[variant]


def test_efficientnet_blocks_are_torchvisions_features(profile_of: Any) -> None:
    profile = profile_of(**conf("efficientnet_b0"))
    # B0's stages hold 1, 2, 2, 3, 3, 4, 1 MBConv blocks (Tan & Le 2019, table 1).
    stages = [1, 2, 2, 3, 3, 4, 1]
    mbconv = [f"features.{s}.{i}" for s, n in enumerate(stages, start=1) for i in range(n)]
    assert profile.blocks == ["features.0", *mbconv, "features.8", "classifier"]
    names = {op.name for op in profile.ops}
    assert {"features.1.0.block.0.0", "features.2.0.block.2.fc1", "classifier.1"} <= names
