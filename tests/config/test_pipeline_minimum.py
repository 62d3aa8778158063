"""PopTorch's compile-time rule of a pipelined program, declared once (`pipeline_minimum`):
refused by validation, never drawn by the search."""

from __future__ import annotations

from typing import Any

import pytest

import ipu_tune
from ipu_tune.config import at_pipeline_minimum, load_unvalidated
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import pipeline_minimum


def _config(mode: str, schedule: str, **plan: Any) -> dict[str, Any]:
    return {
        "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
        "workload": {"mode": mode, "micro_batch_size": 8},
        "system": {"ipu": "mk2", "num_ipus": 4},
        "plan": {"pipeline": {"splits": ["layer2.0", "layer3.0", "layer4.0"],
                              "schedule": schedule}, **plan},
    }


def test_the_rule_applies_to_pipelined_programs_only() -> None:
    assert pipeline_minimum(True, 4, "grouped") == ("plan.gradient_accumulation", 4)
    assert pipeline_minimum(False, 4, "interleaved") == ("plan.device_iterations", 4)
    assert pipeline_minimum(True, 4, "sharded") is None
    assert pipeline_minimum(True, 1, "grouped") is None


@pytest.mark.parametrize(("mode", "plan", "message"), [
    ("train", {"gradient_accumulation": 3},
     "plan.gradient_accumulation=3: must be >= 4, the pipeline stages"),
    ("infer", {"device_iterations": 2},
     "plan.device_iterations=2: must be >= 4, the pipeline stages"),
])
def test_evaluate_refuses_a_pipelined_plan_poptorch_would_not_compile(
        mode: str, plan: dict[str, Any], message: str) -> None:
    with pytest.raises(IpuTuneError, match=message):
        ipu_tune.evaluate(_config(mode, "grouped", **plan))
    assert ipu_tune.evaluate(_config(mode, "sharded", **plan)).throughput > 0
    assert ipu_tune.evaluate(_config(mode, "grouped", **{k: 4 for k in plan})).throughput > 0


def test_plans_the_tool_makes_are_raised_to_the_minimum() -> None:
    cfg = at_pipeline_minimum(load_unvalidated(_config("infer", "grouped")))
    assert cfg.plan.device_iterations == 4 and cfg.plan.gradient_accumulation == 1
    cfg = at_pipeline_minimum(load_unvalidated(_config("train", "grouped",
                                                       gradient_accumulation=16)))
    assert cfg.plan.gradient_accumulation == 16
