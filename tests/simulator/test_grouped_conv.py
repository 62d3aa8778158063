"""A grouped convolution fills N / groups of the AMP's conv units per group
(`IpuSpec.amp_conv_units`): a depthwise one runs at 1/16 of the FP16.16 rate on Mk2, the
same with either partials type; a group of 16 channels or more runs at the dense rate."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.hardware import IPUS, make_system
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import simulate
from tests.simulator.helpers import matmul_profile

_PLAN = ExecutionPlan(micro_batch_size=64, optimizer="sgd", precision="16.16", mode="infer")
_CHANNELS = 512


def _conv(groups: int, k: int = 0) -> ModelProfile:
    """One 3x3 convolution of 512 channels in `groups` groups over a 56x56 map (`k`: its K,
    9 x the input channels per group by default)."""
    base = matmul_profile(56 * 56, k or 9 * _CHANNELS // groups, _CHANNELS)
    op = replace(base.ops[0], kind="conv", groups=groups)
    return replace(base, ops=(op,), input_kind="image")


def _forward_s(groups: int, partials: str, k: int = 0) -> float:
    plan = replace(_PLAN, partials=partials)
    return simulate(_conv(groups, k), make_system("mk2", 1), plan).stages[0].forward_s


def test_conv_units_follow_the_amp_macs_per_cycle() -> None:
    mk2, mk1 = IPUS["mk2"], IPUS["mk1"]
    assert [mk2.amp_conv_units(True, True), mk2.amp_conv_units(True, False),
            mk2.amp_conv_units(False, False)] == [16, 8, 8]
    assert mk1.amp_conv_units(True, True) == 8


def test_a_depthwise_convolution_runs_at_the_vector_rate_with_either_partials() -> None:
    """Same FLOPs per group count: a depthwise conv (512 groups) of K = 9 against a dense one
    of the same FLOPs; the arithmetic dominates at this size, so the time is ~16x."""
    dense = _forward_s(1, "half") * 1  # K = 4608: 512x the FLOPs of the depthwise one
    depthwise = _forward_s(_CHANNELS, "half")
    per_flop = depthwise / (dense / _CHANNELS)
    assert 12 < per_flop <= 16.5
    assert _forward_s(_CHANNELS, "float") == pytest.approx(depthwise, rel=0.02)


def test_groups_of_sixteen_channels_run_at_the_dense_rate() -> None:
    wide = _forward_s(_CHANNELS // 16, "half")  # 16 output channels per group
    narrow = _forward_s(_CHANNELS // 4, "half")  # 4 per group, same FLOPs per sample x 4
    dense_same_flops = _forward_s(1, "half", k=9 * 16)
    assert wide == pytest.approx(dense_same_flops, rel=1e-9)
    assert narrow > 3 * wide / 4  # a quarter of the FLOPs at a quarter of the rate
