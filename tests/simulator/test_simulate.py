"""The simulate contract: pure, deterministic, serialisable, fast, errors as documented."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.simulator import (
    DEFAULT_CONSTANTS,
    SIMULATOR_VERSION,
    TIME_PHASES,
    constants_from_mapping,
    simulate,
)
from tests.simulator.helpers import SEED_PLAN, run


def test_deterministic_and_frozen(resnet101: ModelProfile, mk2x2: System) -> None:
    a, b = run(resnet101, mk2x2), run(resnet101, mk2x2)
    assert a == b
    assert a.to_dict() == b.to_dict()
    with pytest.raises(FrozenInstanceError):
        a.fits = False  # type: ignore[misc]
    assert SIMULATOR_VERSION.count(".") == 2 and SIMULATOR_VERSION != "0.0.0"


def test_to_dict_is_json_with_breakdowns(resnet101: ModelProfile, mk2x2: System) -> None:
    d = json.loads(json.dumps(run(resnet101, mk2x2).to_dict()))
    assert d["fits"] is True and d["throughput"] > 0
    assert len(d["memory_per_ipu"]) == 2 and len(d["stages"]) == 2
    assert tuple(d["phases"]) == TIME_PHASES  # the one list, in its order
    assert d["stages"][0]["blocks"] == ["conv1", "layer3.7"]
    assert d["stages"][1]["blocks"] == ["layer3.8", "fc"]
    assert d["extras"]["device_call_cycles"] > 0


def test_constants_override_changes_the_result(resnet101: ModelProfile, mk2x2: System) -> None:
    base = simulate(resnet101, mk2x2, SEED_PLAN)
    slow_host = constants_from_mapping({"preprocess_s_per_sample": 2e-3})
    slow = simulate(resnet101, mk2x2, SEED_PLAN, constants=slow_host)
    assert slow.throughput < base.throughput
    assert slow.extras["simulator_constants"] == "custom"
    assert simulate(resnet101, mk2x2, SEED_PLAN, constants=DEFAULT_CONSTANTS) == base


def test_unknown_split_is_a_user_error(resnet101: ModelProfile, mk2x2: System) -> None:
    with pytest.raises(IpuTuneError, match=r"plan.pipeline.splits"):
        run(resnet101, mk2x2, splits=("layer9.9",))


def test_evaluate_end_to_end_matches_simulate(resnet101: ModelProfile, mk2x2: System) -> None:
    import ipu_tune

    r = ipu_tune.evaluate({
        "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
        "workload": {"micro_batch_size": 64, "optimizer": "adamw"},
        "system": {"ipu": "mk2", "num_ipus": 2},
        "plan": {"precision": "16.16", "gradient_accumulation": 8, "device_iterations": 4,
                 "pipeline": {"splits": ["layer3.8"]}, "recompute": "checkpoints"},
    })
    assert r == run(resnet101, mk2x2)
