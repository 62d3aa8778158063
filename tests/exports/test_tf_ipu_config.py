"""`tf_ipu_config.py`: IPUConfig and the Keras pipeline arguments through public TensorFlow 2 API,
with the plan's values, run against a recording `tensorflow` (and popdist) and a recording model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ipu_tune
from ipu_tune.config import EvalConfig
from ipu_tune.simulator import SimConstants

from ._export_plans import (
    PLANS,
    host_instances,
    install_frameworks,
    make_config,
    outside_amp,
    stage_amps,
    stages,
)
from ._framework_api import POPDIST_API, TF_API, TF_KWARGS
from ._recorder import Log, Recorder, run_source
from ._render import render, tf_snippet
from .test_poptorch import configs

CFG = "tensorflow.python.ipu.config.IPUConfig"
OPS = "tensorflow.python.ipu.pipelining_ops"
SCHEDULES = {"grouped": "Grouped", "interleaved": "Interleaved", "sharded": "Sequential"}


def run_tf(
    monkeypatch: pytest.MonkeyPatch, source: str, popdist: bool
) -> tuple[Log, dict[str, Any]]:
    log = install_frameworks(monkeypatch, popdist)
    namespace = run_source(source, "tf_ipu_config.py")
    namespace["configure_keras_model"](Recorder("keras.Model", log))
    return log, namespace


def check_tf(cfg: EvalConfig, source: str, log: Log, ns: dict[str, Any], popdist: bool,
             head: tuple[str, int] | None = None) -> None:
    """`head`: where the simulation ran a tied output head, for a file made with the profile."""
    p, training = cfg.plan, cfg.workload.mode == "train"
    n = stages(cfg)
    recompute = training and p.recompute != "none" and (p.recompute != "auto" or n > 1)
    # Checkpoints where PopTorch's program puts them: every block, or each stage boundary.
    checkpoints = recompute and (p.recompute == "every_block"
                                 or (p.recompute == "checkpoints" and n > 1))
    assert ("checkpoint" in ns) == checkpoints, p.recompute
    if checkpoints:
        assert ns["CHECKPOINT_MODULES"] or n == 1, "no layer named for the checkpoints"
        ns["checkpoint"](Recorder("x", log))
        assert len(log.calls(f"{OPS}.recomputation_checkpoint")) == 1
    unknown = sorted(path for path in log.paths() if path not in {**TF_API, **POPDIST_API})
    assert not unknown, f"not in the public API list: {unknown}"
    for path, allowed in TF_KWARGS.items():
        for _, kwargs in log.calls(path):
            assert set(kwargs) <= allowed, (path, kwargs)
    assert log.only_call(CFG) == ((), {})
    if host_instances(cfg) > 1 and popdist:
        (args, kwargs) = log.only_call("popdist.tensorflow.set_ipu_config")
        assert repr(args[0]) == CFG and kwargs == {"ipus_per_replica": n, "configure_device": True}
        assert log.calls("tensorflow.python.ipu.distributed.popdist_strategy.PopDistStrategy")
    else:
        assert log.only_set(f"{CFG}.auto_select_ipus") == n * p.replication_factor
        assert log.calls("tensorflow.python.ipu.ipu_strategy.IPUStrategy")
    # The partials type of an fp16 model only: fp32 arithmetic accumulates in fp32 whatever it is.
    partials = p.partials if p.precision.endswith(".16") else None
    for kind in ("matmuls", "convolutions"):
        options = log.only_set(f"{CFG}.{kind}.poplar_options")
        assert float(options["availableMemoryProportion"]) == outside_amp(cfg)
        assert options.get("partialsType") == partials
    _check_stage_options(cfg, log, head)
    assert log.only_set(f"{CFG}.allow_recompute") == recompute
    assert log.sets(f"{CFG}.io_tiles.num_io_tiles") == ([p.io_tiles] if p.io_tiles else [])
    assert log.only_call(f"{CFG}.configure_ipu_system") == ((), {})
    # Gradient all-reduces merged into the simulator's buffer size, for replicated training only.
    merged = [int(SimConstants().all_reduce_buffer_bytes)]
    assert log.sets(f"{CFG}.optimizations.maximum_cross_replica_sum_buffer_size") == (
        merged if training and p.replication_factor > 1 else []
    )
    assert log.only_call("keras.Model.set_infeed_queue_options") == (
        (),
        {"prefetch_depth": p.prefetch_depth},
    )
    assert 1 <= p.prefetch_depth <= 255
    pipelining = log.calls("keras.Model.set_pipelining_options")
    if n > 1:
        ((_, kwargs),) = pipelining
        # A tied head runs as a stage of its own after the last, on its simulated IPU.
        assert kwargs["device_mapping"] == list(range(n)) + ([head[1]] if head else [])
        assert repr(kwargs["pipeline_schedule"]) == (
            f"{OPS}.PipelineSchedule.{SCHEDULES[p.pipeline.schedule]}"
        )
        if training:
            assert kwargs["gradient_accumulation_steps_per_replica"] == p.gradient_accumulation
            assert kwargs["offload_weight_update_variables"] == p.offload_optimizer_state
            assert kwargs["replicated_optimizer_state_sharding"] == p.replicated_tensor_sharding
            if recompute:
                assert repr(kwargs["recomputation_mode"]) == f"{OPS}.RecomputationMode.Auto"
    else:
        assert pipelining == []
    # TensorFlow shards offloaded optimizer state only (pipelining_ops.py L410): a program whose
    # plan shards on-chip state says in its header that TensorFlow does not run it so.
    state = [*pipelining, *log.calls("keras.Model.set_gradient_accumulation_options")]
    if any(k.get("replicated_optimizer_state_sharding")
           and not k.get("offload_weight_update_variables") for _, k in state):
        assert "WARNING: the plan shards its on-chip optimizer state" in " ".join(source.split())
    # Keras: steps_per_execution is a multiple of the accumulation count (keras.rst L27-122).
    accumulation = p.gradient_accumulation if training else 1
    assert ns["STEPS_PER_EXECUTION"] == p.device_iterations * accumulation
    assert ns["STEPS_PER_EXECUTION"] % accumulation == 0
    assert ns["MICRO_BATCH_SIZE"] == cfg.workload.micro_batch_size
    assert max(len(line) for line in source.splitlines()) <= 99


def _check_stage_options(cfg: EvalConfig, log: Log, head: tuple[str, int] | None) -> None:
    """Different proportions per IPU: each pipeline stage's forward (and backward) options
    (a tied head's stage at its IPU's)."""
    amps = stage_amps(cfg)
    amps += [amps[head[1]]] if head else []
    made = log.calls(f"{OPS}.PipelineStageOptions")
    if len(set(amps)) == 1:
        assert not made
        return
    assert [float(kw["matmul_options"]["availableMemoryProportion"]) for _, kw in made] == amps
    assert all(kw["convolution_options"] == kw["matmul_options"] for _, kw in made)
    (_, kwargs) = log.only_call("keras.Model.set_pipelining_options")
    assert len(kwargs["forward_propagation_stages_poplar_options"]) == len(amps)
    training = cfg.workload.mode == "train"
    assert ("backward_propagation_stages_poplar_options" in kwargs) == training


@pytest.mark.parametrize("name", list(PLANS))
@pytest.mark.parametrize("popdist", [False, True], ids=["direct", "under-poprun"])
def test_export_sets_the_plan_through_public_tf_api(
    name: str, popdist: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(PLANS[name])
    source = tf_snippet(cfg, ipu_tune.evaluate(cfg))
    log, namespace = run_tf(monkeypatch, source, popdist)
    check_tf(cfg, source, log, namespace, popdist)


@pytest.mark.parametrize("schedule", ["interleaved", "sharded"])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_schedules_and_inference(schedule: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bert = PLANS["pipelined-bert"]
    plan = {**bert["plan"], "pipeline": {**bert["plan"]["pipeline"], "schedule": schedule}}
    if mode == "infer":
        plan["gradient_accumulation"] = 1
        plan["device_iterations"] = 8
    cfg = make_config({**bert, "workload": {**bert["workload"], "mode": mode}, "plan": plan})
    source = tf_snippet(cfg)
    log, namespace = run_tf(monkeypatch, source, False)
    check_tf(cfg, source, log, namespace, False)


def test_single_stage_accumulation_uses_the_gradient_accumulation_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = make_config(PLANS["default-study"])
    log, _ = run_tf(monkeypatch, tf_snippet(cfg), False)
    (_, kwargs) = log.only_call("keras.Model.set_gradient_accumulation_options")
    assert kwargs == {
        "gradient_accumulation_steps_per_replica": cfg.plan.gradient_accumulation,
        "offload_weight_update_variables": cfg.plan.offload_optimizer_state,
        "replicated_optimizer_state_sharding": cfg.plan.replicated_tensor_sharding,
    }


_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=20, deadline=None, suppress_health_check=_SLOW)
@given(cfg=configs(), popdist=st.booleans())
def test_any_valid_plan_gives_an_ipu_config_with_its_values(
    cfg: EvalConfig, popdist: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tf_snippet(cfg)
    with monkeypatch.context() as patch:
        log, namespace = run_tf(patch, source, popdist)
        check_tf(cfg, source, log, namespace, popdist)


@pytest.mark.parametrize("recompute", ["every_block", "checkpoints"])
def test_checkpoints_are_where_poptorch_puts_them(
        recompute: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bert = PLANS["pipelined-bert"]
    cfg = make_config({**bert, "plan": {**bert["plan"], "recompute": recompute}})
    profile = ipu_tune.profile(cfg.model)
    tf_ns = run_tf(monkeypatch, render("tensorflow", cfg, None, profile), False)[1]
    torch_source = render("poptorch", cfg, None, profile)
    listed = torch_source.split("checkpoints = [", 1)[1].split("]", 1)[0]
    expected = [line.strip().rstrip(",").strip('"') for line in listed.splitlines()
                if line.strip()]
    assert tf_ns["CHECKPOINT_MODULES"] == expected
    assert len(expected) == (len(profile.blocks) - 1 if recompute == "every_block" else 3)
