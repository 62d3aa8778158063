"""Gradient all-reduces merged into buffers, as the simulator times them, in every program.

The simulator merges the replicas' gradient all-reduces into buffers of
`SimConstants.all_reduce_buffer_bytes` (Graphcore's MLPerf ResNet-50 TF1 configs:
`max_cross_replica_buffer_size: 52428800`). TensorFlow sets that size, PopTorch turns the merging
on through its PopART pass-through, PopART's program says it has no listed field for it; and only
for replicated training (one replica or inference has no gradient all-reduce).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from ipu_tune.config import EvalConfig
from ipu_tune.simulator import SimConstants

from ._export_plans import PLANS, make_config
from ._framework_api import POPART_PASS_THROUGH_KEYS, TF_API
from ._render import popart_snippet, poptorch_snippet, tf_snippet
from .test_poptorch import run_export
from .test_tf_ipu_config import run_tf

TF_KEY = (
    "tensorflow.python.ipu.config.IPUConfig.optimizations.maximum_cross_replica_sum_buffer_size"
)
MERGE_KEY = "replicatedCollectivesSettings.mergeAllReduceCollectives"


def _variant(kind: str) -> EvalConfig:
    """The default study's plan (2 replicas, training), with one replica, or for inference."""
    raw: dict[str, Any] = copy.deepcopy(PLANS["default-study"])
    if kind == "one-replica":
        raw["system"]["num_ipus"] = 1
        raw["plan"]["replication_factor"] = 1
        raw["plan"]["replicated_tensor_sharding"] = False
    elif kind == "inference":
        raw["workload"]["mode"] = "infer"
        raw["plan"]["gradient_accumulation"] = 1
    return make_config(raw)


KINDS = {"replicated-training": True, "one-replica": False, "inference": False}


def test_the_buffer_is_the_simulators_mlperf_value() -> None:
    assert SimConstants().all_reduce_buffer_bytes == 52428800
    assert TF_KEY in TF_API and MERGE_KEY in POPART_PASS_THROUGH_KEYS


@pytest.mark.parametrize("kind", list(KINDS))
def test_tf_sets_the_cross_replica_sum_buffer_only_for_replicated_training(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _variant(kind)
    log, _ = run_tf(monkeypatch, tf_snippet(cfg), False)
    expected = [int(SimConstants().all_reduce_buffer_bytes)] if KINDS[kind] else []
    assert log.sets(TF_KEY) == expected


@pytest.mark.parametrize("kind", list(KINDS))
def test_poptorch_merges_all_reduces_only_for_replicated_training(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _variant(kind)
    log, _ = run_export(monkeypatch, poptorch_snippet(cfg))
    merged = [args for args, _ in log.calls("poptorch.Options._Popart.set") if args[0] == MERGE_KEY]
    assert merged == ([(MERGE_KEY, True)] if KINDS[kind] else [])


@pytest.mark.parametrize("kind", list(KINDS))
def test_popart_says_it_has_no_merge_field_only_for_replicated_training(kind: str) -> None:
    source = popart_snippet(_variant(kind))
    text = " ".join(line.lstrip("# ") for line in source.splitlines())
    assert ("knows no SessionOptions field" in text) == KINDS[kind]
    assert MERGE_KEY not in re.sub(r"#.*", "", source)  # named in a comment, never set


def _interleaved(raw_plan: dict[str, Any]) -> EvalConfig:
    bert = PLANS["pipelined-bert"]
    plan = {**raw_plan, "pipeline": {**raw_plan["pipeline"], "schedule": "interleaved"}}
    return make_config({**bert, "plan": plan})


@pytest.mark.parametrize("render", [poptorch_snippet, popart_snippet], ids=["poptorch", "popart"])
def test_an_interleaved_plan_states_the_framework_has_no_such_schedule(render: Any) -> None:
    cfg = _interleaved(PLANS["pipelined-bert"]["plan"])
    text = " ".join(line.lstrip("# ") for line in render(cfg).splitlines())
    assert "has no interleaved schedule" in text or "have no interleaved pipeline schedule" in text
    assert "PipelineSchedule.Interleaved" in text  # what to do: the TensorFlow program
    assert "plan.pipeline.schedule=grouped" in text  # or re-plan for this framework
