"""The run summary's figures say what they are."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ipu_tune.cli._summary import _speedup


def test_the_speed_up_over_the_users_plan_is_a_ratio_not_a_rate() -> None:
    """It read `x8.52 samples/s over your plan`, a rate of 8.52 samples/s to a reader."""
    plan = {"plan": {"from_ipu_config": None}, "model": {"dataset": {"name": "imagenet"}}}
    steps = ({"bottleneck": "compute", "fits": True, "throughput": 100.0, "config": plan},
             {"bottleneck": "compute", "fits": True, "throughput": 852.0, "config": plan})
    explanation: Any = SimpleNamespace(steps=steps)
    assert _speedup(explanation) == "; 8.52x your plan's samples/s"
