"""`popart_options.py`: the plan's values; run against a recording popart."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ipu_tune
from ipu_tune.config import EvalConfig
from ipu_tune.exports._model_source import module_path

from ._export_plans import (
    PLANS,
    host_instances,
    install_frameworks,
    make_config,
    outside_amp,
    stage_amps,
    stages,
)
from ._framework_api import POPART_API, POPDIST_API
from ._recorder import Log, run_source
from ._render import popart_snippet
from .test_poptorch import configs

S = "popart.SessionOptions"


def check_popart(cfg: EvalConfig, source: str, log: Log, ns: dict[str, Any], popdist: bool,
                 head: tuple[str, int] | None = None) -> None:
    """`head`: where the simulation ran a tied output head, for a file made with the profile:
    its IPU in HEAD_IPU, and a pipeline stage of its own."""
    p, training = cfg.plan, cfg.workload.mode == "train"
    n = stages(cfg)
    assert ns.get("HEAD_IPU") == (dict([head]) if head else None)
    unknown = sorted(path for path in log.paths() if path not in {**POPART_API, **POPDIST_API})
    assert not unknown, f"not in the public API list: {unknown}"
    assert {n.names[0].name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import)} <= {
        "popart",
        "popdist",
        "popdist.popart",
    }
    assert log.only_call(S) == ((), {})
    # Synthetic data, as simulated, is made on the IPU; any other dataset streams from the host.
    synthetic = [repr(v) for v in log.sets(f"{S}.syntheticDataMode")]
    assert synthetic == (["popart.SyntheticDataMode.RandomNormal"]
                         if cfg.model.dataset.name == "synthetic" else [])
    if host_instances(cfg) > 1 and popdist:
        (args, _) = log.only_call("popdist.popart.configureSessionOptions")
        assert repr(args[0]) == S and not log.sets(f"{S}.replicatedGraphCount")
    else:
        assert log.only_set(f"{S}.replicatedGraphCount") == p.replication_factor
        assert log.only_set(f"{S}.enableReplicatedGraphs") == (p.replication_factor > 1)
    pipelined = n > 1 and p.pipeline.schedule != "sharded"
    assert log.sets(f"{S}.enablePipelining") == ([pipelined] if n > 1 else [])
    modes = [repr(m) for m in log.sets(f"{S}.virtualGraphMode")]
    overlap = p.io_tiles > 0 and not pipelined
    if n > 1:
        assert modes == ["popart.VirtualGraphMode.Manual"]
        assert ns["STAGE_STARTS"] == [module_path(cfg, s) for s in p.pipeline.splits]
    else:
        assert modes == (["popart.VirtualGraphMode.Auto"] if overlap else [])
    if training:
        assert log.only_set(f"{S}.accumulationFactor") == p.gradient_accumulation
        assert log.only_set(f"{S}.enableGradientAccumulation") == (p.gradient_accumulation > 1)
        if pipelined:  # PopART pipelining needs accumulation >= stages (as PopTorch checks)
            assert p.gradient_accumulation >= n + (head is not None)
        recompute = {
            "auto": "Pipeline" if pipelined else None,
            "none": "NoRecompute",
            "checkpoints": "Pipeline" if pipelined else "Standard",
            "every_block": "Pipeline" if pipelined else "Standard",
        }[p.recompute]
        got = [repr(v) for v in log.sets(f"{S}.autoRecomputation")]
        assert got == ([f"popart.RecomputationType.{recompute}"] if recompute else [])
        _check_optimizer_state(cfg, log)
    else:
        assert not log.sets(f"{S}.accumulationFactor") and not log.sets(f"{S}.autoRecomputation")
    amp = log.only_set(f"{S}.convolutionOptions")
    assert float(amp["availableMemoryProportion"]) == outside_amp(cfg)
    assert float(log.only_set(f"{S}.matmulOptions")["availableMemoryProportion"]) == (
        outside_amp(cfg))
    amps = stage_amps(cfg)
    assert ns.get("AVAILABLE_MEMORY_PROPORTION_PER_IPU") == (
        None if len(set(amps)) == 1 else amps)
    # The partials type of an fp16 model only: fp32 arithmetic accumulates in fp32 whatever it is.
    partials = p.partials if p.precision.endswith(".16") else None
    assert log.sets(f"{S}.partialsTypeMatMuls") == ([partials] if partials else [])
    assert amp.get("partialsType") == partials
    assert log.only_set(f"{S}.defaultBufferingDepth") == p.prefetch_depth
    assert ns["BATCHES_PER_STEP"] == p.device_iterations
    assert log.sets(f"{S}.numIOTiles") == ([p.io_tiles] if p.io_tiles else [])
    assert log.sets(f"{S}.enableExplicitMainLoops") == ([True] if overlap else [])
    assert log.sets(f"{S}.useHostCopyOps") == ([True] if overlap else [])
    # No listed SessionOptions field merges all-reduces: the program says so, sets nothing.
    merged = training and p.replication_factor > 1
    text = " ".join(line.lstrip("# ") for line in source.splitlines())
    assert ("knows no SessionOptions field" in text) == merged
    assert max(len(line) for line in source.splitlines()) <= 99


def _check_optimizer_state(cfg: EvalConfig, log: Log) -> None:
    p = cfg.plan
    placed = log.sets(f"{S}.optimizerStateTensorLocationSettings")
    if not (p.offload_optimizer_state or p.replicated_tensor_sharding):
        assert placed == []
        return
    ((settings_args, _),) = log.calls("popart.TensorLocationSettings")
    ((location_args, _),) = log.calls("popart.TensorLocation")
    storage = "OffChip" if p.offload_optimizer_state else "OnChip"
    sharding = "On" if p.replicated_tensor_sharding else "Off"
    assert [repr(a) for a in location_args] == [
        f"popart.TensorStorage.{storage}",
        f"popart.ReplicatedTensorSharding.{sharding}",
    ]
    assert settings_args[1] == 2  # minElementsForOffChip, PopART's default
    if p.replicated_tensor_sharding:
        assert settings_args[2] == p.replication_factor
    assert [repr(v) for v in placed] == ["popart.TensorLocationSettings"]


@pytest.mark.parametrize("name", list(PLANS))
@pytest.mark.parametrize("popdist", [False, True], ids=["direct", "under-poprun"])
def test_export_sets_the_plan_through_public_popart_api(
    name: str, popdist: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(PLANS[name])
    result = ipu_tune.evaluate(cfg)
    source = popart_snippet(cfg, result)
    log = install_frameworks(monkeypatch, popdist)
    namespace = run_source(source, "popart_options.py")
    check_popart(cfg, source, log, namespace, popdist)
    assert f"bottleneck {result.bottleneck}" in " ".join(source.split())


@pytest.mark.parametrize("recompute", ["none", "checkpoints"])
@pytest.mark.parametrize("schedule", ["grouped", "sharded"])
def test_recompute_and_schedule_variants(
    recompute: str, schedule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bert = PLANS["pipelined-bert"]
    raw = {
        **bert,
        "plan": {
            **bert["plan"],
            "recompute": recompute,
            "pipeline": {**bert["plan"]["pipeline"], "schedule": schedule},
            "io_tiles": 32,
        },
    }
    cfg = make_config(raw)
    source = popart_snippet(cfg)
    log = install_frameworks(monkeypatch, False)
    check_popart(cfg, source, log, run_source(source, "popart_options.py"), False)


_SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=20, deadline=None, suppress_health_check=_SLOW)
@given(cfg=configs(), popdist=st.booleans())
def test_any_valid_plan_gives_session_options_with_its_values(
    cfg: EvalConfig, popdist: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = popart_snippet(cfg)
    with monkeypatch.context() as patch:
        log = install_frameworks(patch, popdist)
        check_popart(cfg, source, log, run_source(source, "popart_options.py"), popdist)
