"""One available memory proportion per IPU, as Graphcore's configs set them: each stage's IPU
runs its convs and matmuls at its own proportion, and nothing else changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from tests.simulator.helpers import SEED_PLAN, ipu_bytes, matmul_profile, run


def test_the_same_value_on_every_ipu_is_the_one_proportion(
        resnet101: ModelProfile, mk2x2: System) -> None:
    one = run(resnet101, mk2x2, available_memory_proportion=0.3)
    each = run(resnet101, mk2x2, available_memory_proportion=0.9,
               available_memory_proportion_per_ipu=(0.3, 0.3))
    assert each == one


def test_each_stage_takes_its_own_ipus_proportion(mk2x2: System) -> None:
    # One 2,048 x 4,096 x 4,096 matmul per stage at micro-batch 16: 84 MB of temporaries,
    # two serial passes at 0.05 (47 MB), one at 0.6.
    profile = matmul_profile(128, 4096, 4096, blocks=2)
    plan = replace(SEED_PLAN, splits=("block1",), micro_batch_size=16)
    low, high = (run(profile, mk2x2, plan, available_memory_proportion=a) for a in (0.05, 0.6))
    mixed = run(profile, mk2x2, plan, available_memory_proportion_per_ipu=(0.05, 0.6))
    for ipu in (0, 1):
        assert ipu_bytes(low, ipu, "temporaries") < ipu_bytes(high, ipu, "temporaries")
        assert low.stages[ipu].forward_s > high.stages[ipu].forward_s
    for ipu, alone in ((0, low), (1, high)):
        assert ipu_bytes(mixed, ipu, "temporaries") == ipu_bytes(alone, ipu, "temporaries")
        assert mixed.stages[ipu] == alone.stages[ipu]
    assert mixed.extras["amp_max_passes"] == low.extras["amp_max_passes"] == 2


def test_a_list_the_wrong_length_is_no_plan(resnet101: ModelProfile, mk2x2: System) -> None:
    with pytest.raises(IpuTuneError, match="one value per IPU"):
        run(resnet101, mk2x2, available_memory_proportion_per_ipu=(0.2, 0.3, 0.4))
