"""The plain-Python typed merge (`typed`'s fast path) gives exactly OmegaConf's object, and
whatever it does not take itself still ends with OmegaConf's one-line error."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ipu_tune.config import (
    EvalConfig,
    ModelConfig,
    TuneConfig,
    load_config,
    to_plain_dict,
    typed,
)
from ipu_tune.config._load import _Fallback, _merge, _omegaconf_typed
from ipu_tune.errors import IpuTuneError

SAME: list[tuple[type, dict[str, Any]]] = [
    (EvalConfig, {}),
    (EvalConfig, {"model": {"name": "bert_base", "sequence_length": 128,
                            "kwargs": {"layers": 2, "dims": (1, 2), "nested": {"a": None}}}}),
    (EvalConfig, {"plan": {"precision": "16.16", "available_memory_proportion": 1,
                           "pipeline": {"splits": ("layer3.0",), "schedule": "interleaved"},
                           "offload_optimizer_state": True}}),
    (EvalConfig, {"model": {"input_shape": (3, 32, 32), "dataset": {"sample_bytes": 3072,
                                                                    "preprocess_s_per_sample": 1}},
                  "system": {"ipu": "bow", "num_ipus": 4, "hosts": 2}}),
    (TuneConfig, {"study": {"n_trials": 5, "timeout_s": 3, "name": None},
                  "sampler": {"params": {"n_startup_trials": 4}}, "results_dir": "out"}),
    (ModelConfig, {"name": None, "_target_": "pkg.mod.make", "num_classes": 3}),
]


@pytest.mark.parametrize(("schema", "data"), SAME, ids=[str(i) for i in range(len(SAME))])
def test_fast_merge_equals_omegaconf(schema: type, data: dict[str, Any]) -> None:
    fast = _merge(schema, data)
    slow = _omegaconf_typed(schema, data)
    assert fast == slow
    assert repr(fast) == repr(slow)  # same value types too (1 -> 1.0 for a float, tuples -> lists)


@pytest.mark.parametrize(("schema", "data"), SAME, ids=[str(i) for i in range(len(SAME))])
def test_plain_dict_equals_asdict(schema: type, data: dict[str, Any]) -> None:
    """`to_plain_dict` is `dataclasses.asdict` without the deep copies of immutable leaves:
    same values and types, and no container shared with the config."""
    cfg = _merge(schema, data)
    plain = to_plain_dict(cfg)
    assert repr(plain) == repr(dataclasses.asdict(cfg))
    _mutate(plain)
    assert repr(dataclasses.asdict(cfg)) == repr(dataclasses.asdict(_merge(schema, data)))


def _mutate(node: Any) -> None:
    if isinstance(node, dict):
        for value in node.values():
            _mutate(value)
        node["mutated"] = True
    elif isinstance(node, list):
        for value in node:
            _mutate(value)
        node.append("mutated")


# Values OmegaConf converts or refuses: the fast path hands them over, results/errors unchanged.
HANDED_OVER: list[dict[str, Any]] = [
    {"plan": {"gradient_accumulation": "8"}},  # OmegaConf converts "8" -> 8
    {"plan": {"gradient_accumulation": "abc"}},
    {"plan": {"foo": 1}},
    {"plan": {"gradient_accumulation": True}},
    {"plan": {"gradient_accumulation": 2.0}},
    {"plan": {"precision": None}},
    {"plan": {"pipeline": {"splits": "layer3.0"}}},
    {"system": {"ipu": 3}},
    {"model": {"name": "???"}},
]


@pytest.mark.parametrize("data", HANDED_OVER, ids=[str(i) for i in range(len(HANDED_OVER))])
def test_fast_merge_hands_over_to_omegaconf(data: dict[str, Any]) -> None:
    with pytest.raises(_Fallback):
        _merge(EvalConfig, data)
    try:
        slow: Any = _omegaconf_typed(EvalConfig, data)
    except IpuTuneError as exc:
        slow = str(exc)
    try:
        fast: Any = typed(EvalConfig, data)
    except IpuTuneError as exc:
        fast = str(exc)
    assert fast == slow


@pytest.mark.parametrize("value", ["${plan.io_tiles}", "${oc.env:HOME}", "a${oc.decode:1}"])
def test_an_interpolation_in_a_plain_mapping_is_refused_not_resolved(value: str) -> None:
    with pytest.raises(IpuTuneError, match=r"^workload\.micro_batch_size=.*never resolved"):
        typed(EvalConfig, {"workload": {"micro_batch_size": value}})


@pytest.mark.parametrize("value", ["yes", "on", 1, 2, 0])
def test_a_switch_takes_true_or_false_only(value: Any) -> None:
    """OmegaConf reads these as true or false; a switch given a count or a word is refused."""
    assert _omegaconf_typed(EvalConfig, {"plan": {"offload_optimizer_state": value}})
    with pytest.raises(IpuTuneError, match=r"^plan\.offload_optimizer_state=.*: allowed: "
                       r"true or false$"):
        typed(EvalConfig, {"plan": {"offload_optimizer_state": value}})


def test_error_messages_name_the_key() -> None:
    with pytest.raises(IpuTuneError, match=r"^plan\.foo: unknown key"):
        load_config({"plan": {"foo": 1}})
    with pytest.raises(IpuTuneError,
                       match=r"^plan\.gradient_accumulation='abc': allowed: an integer$"):
        load_config({"plan": {"gradient_accumulation": "abc"}})
    with pytest.raises(IpuTuneError, match=r"^plan\.io_tiles"):
        load_config({"plan": {"io_tiles": 7}})
    with pytest.raises(IpuTuneError, match=r"only model\._target_"):
        load_config({"plan": {"_target_": "os.system"}})


@pytest.mark.parametrize(("data", "where"), [
    ({"model": {"kwargs": {"_target_": "os.system"}}}, "model.kwargs._target_='os.system'"),
    ({"model": {"kwargs": {"x": [{"_target_": "os.system"}]}}},
     "model.kwargs.x._target_='os.system'"),
    ({"model": {"dataset": {"_target_": "os.system"}}}, "model.dataset._target_='os.system'"),
    ({"_target_": "os.system"}, "_target_='os.system'"),
])
def test_a_factory_named_outside_model_target_is_refused(data: dict[str, Any], where: str) -> None:
    """The fast merge hands any other `_target_` over, and `typed` refuses it by its path."""
    with pytest.raises(_Fallback):
        _merge(EvalConfig, data)
    with pytest.raises(IpuTuneError) as exc:
        typed(EvalConfig, data)
    assert str(exc.value) == f"{where}: only model._target_ may name a factory to instantiate"
    assert typed(ModelConfig, {"_target_": "pkg.make"})._target_ == "pkg.make"
