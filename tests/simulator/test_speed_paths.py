"""The fast paths of a cached evaluation build the same objects the slow ones would.

`simulate` builds its frozen results without their generated `__init__`; `evaluate(mapping)`
validates with per-knob checkers worded once. These tests hold both to the plain forms.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest

from ipu_tune.hardware import System
from ipu_tune.knobs import KNOBS, Knob, checker
from ipu_tune.models import ModelProfile
from ipu_tune.simulator import IpuMemory, SimResult, StageTime
from tests.simulator.helpers import run


def _rebuilt(obj: object) -> object:
    """`obj` made again through its class's own constructor, field by field."""
    assert dataclasses.is_dataclass(obj) and not isinstance(obj, type)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return type(obj)(**values)


@pytest.mark.parametrize("changes", [
    {},
    {"splits": (), "mode": "infer", "gradient_accumulation": 1},
    {"splits": ("layer2.1", "layer3.8", "layer4.0"), "schedule": "interleaved"},
    {"micro_batch_size": 4096},  # does not fit: the reason is set
])
def test_results_equal_constructor_built(resnet101: ModelProfile, mk2x2: System,
                                         changes: dict[str, object]) -> None:
    result = run(resnet101, mk2x2, **changes)
    parts: list[object] = [result, *result.memory, *result.stages]
    assert {type(p) for p in parts} == {SimResult, IpuMemory, StageTime}
    for part in parts:
        again = _rebuilt(part)
        assert again == part and part == again
        assert vars(again) == vars(part)  # same fields, nothing more
        assert pickle.loads(pickle.dumps(part)) == part
        with pytest.raises(dataclasses.FrozenInstanceError):
            part.stage = 1  # type: ignore[attr-defined]
    for stage in result.stages:  # the hashable one (the others hold dicts)
        assert hash(stage) == hash(_rebuilt(stage))
    assert (result.reason != "") == (not result.fits)



@pytest.mark.parametrize("changes", [
    {"micro_batch_size": 256},  # training, float partials
    {"micro_batch_size": 256, "partials": "half", "precision": "16.16"},
    {"micro_batch_size": 512, "splits": (), "mode": "infer", "gradient_accumulation": 1},
])
def test_costs_reused_across_amp_values_equal_costs_computed_afresh(
        resnet101: ModelProfile, mk2x2: System, changes: dict[str, Any]) -> None:
    """A new available memory proportion reuses its key's other costs and, when the serial
    passes are the same, their block sums: every result equals the one a copy of the profile
    (no cache entry of its own) gives, bit for bit."""
    amps = (0.05, 0.1, 0.15, 0.3, 0.6, 1.0, 0.05, 0.3)
    cached = [run(resnet101, mk2x2, available_memory_proportion=a, **changes) for a in amps]
    assert len({r.extras["amp_max_passes"] for r in cached}) > 1  # passes change on the way
    for amp, result in zip(amps, cached, strict=True):
        fresh = run(copy.deepcopy(resnet101), mk2x2, available_memory_proportion=amp, **changes)
        assert fresh == result
        assert fresh.memory[0].categories["temporaries"] == (
            result.memory[0].categories["temporaries"])


def _reference_problem(knob: Knob, value: Any) -> str | None:
    """The rule of each knob as knobs.py words it, written out branch by branch."""
    if knob.rule == "power_of_two":
        ok = value >= 1 and value & (value - 1) == 0
        return None if ok else "must be a power of two (1, 2, 4, ...)"
    if knob.rule == "io_tiles":
        ok = value == 0 or (32 <= value <= 192 and value % 2 == 0)
        return None if ok else "allowed: 0 or an even number in 32..192"
    if knob.type is float:
        upper = knob.high if knob.high is not None else float("inf")
        if knob.low > 0:  # a least value that is allowed itself (the proportion's 0.001)
            return None if knob.low <= value <= upper else f"must be in [{knob.low:g}, {upper:g}]"
        return None if 0 < value <= upper else f"must be in (0, {upper:g}]"
    if knob.domain is not None and knob.type is str:
        return None if value in knob.domain else "allowed: " + ", ".join(knob.domain)
    if knob.type is int and value < knob.low:
        return f"must be >= {knob.low:g}"
    return None


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.key)
def test_knob_checker_answers_like_the_rule(knob: Knob) -> None:
    """The checker chosen once per knob (validation's fast path) answers like its rule."""
    samples: list[Any] = [knob.default]
    if knob.domain is not None:
        samples += list(knob.domain)
    if knob.type is int:
        samples += [0, -1, 1, 2, 3, 32, 33, 192, 194]
    if knob.type is float:
        samples += [0.0, -1.0, 0.5, 1.0, 1.5, float("nan")]
    if knob.type is str:
        samples += ["", "nope"]
    for value in samples:
        assert checker(knob)(value) == knob.problem(value) == _reference_problem(knob, value)
    assert checker(knob)(knob.default) is None  # every default is allowed
