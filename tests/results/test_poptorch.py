"""The PopTorch snippet: valid Python that sets every knob of the plan, with why."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import ipu_tune
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.models import ModelProfile
from ipu_tune.results._poptorch import module_access, poptorch_snippet

MODEL = {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10}


def _profile() -> ModelProfile:
    return ipu_tune.profile(MODEL)


def _splits(stages: int) -> list[str]:
    blocks = _profile().blocks
    return [blocks[round(i * len(blocks) / stages)] for i in range(1, stages)]


def _cfg(stages: int = 2, replicas: int = 1, mode: str = "train", **plan: Any) -> EvalConfig:
    workload = {"mode": mode}
    for key in ("micro_batch_size", "optimizer"):
        if key in plan:
            workload[key] = plan.pop(key)
    schedule = plan.pop("schedule", "grouped")
    return load_config(
        {
            "model": MODEL,
            "workload": workload,
            "system": {"num_ipus": stages * replicas},
            "plan": {
                "replication_factor": replicas,
                "pipeline": {"splits": _splits(stages), "schedule": schedule},
                **plan,
            },
        }
    )


def _norm(source: str) -> str:
    """Source with layout and quoting normalised, so wrapped calls compare equal."""
    return ast.unparse(ast.parse(source))


def expected(cfg: EvalConfig) -> list[str]:
    """Statements (normalised) the snippet must contain for the plan of `cfg`."""
    p, w = cfg.plan, cfg.workload
    stages = len(p.pipeline.splits) + 1
    out = [
        f"opts.deviceIterations({p.device_iterations})",
        f"opts.replicationFactor({p.replication_factor})",
        f'opts.setAvailableMemoryProportion({{f"IPU{{i}}": {p.available_memory_proportion}'
        f" for i in range({stages})}})",
        f'opts._Popart.set("defaultPrefetchBufferingDepth", {p.prefetch_depth})',
        f"model = model.{'half' if p.precision.endswith('16') else 'float'}()",
        f"INPUT_DTYPE = torch.{'float16' if p.precision.startswith('16') else 'float32'}",
    ]
    for ipu, split in enumerate(p.pipeline.splits, start=1):
        target = module_access(split)
        out.append(f"{target} = poptorch.BeginBlock({target}, ipu_id={ipu})")
    if stages > 1:
        strategy = "Sharded" if p.pipeline.schedule == "sharded" else "Pipelined"
        out.append(
            f"opts.setExecutionStrategy(poptorch.{strategy}Execution(poptorch.AutoStage.SameAsIpu))"
        )
    if w.mode == "train":
        out.append(f"opts.Training.gradientAccumulation({p.gradient_accumulation})")
        out.append("poptorch_model = poptorch.trainingModel(model, opts, optimizer=optimizer)")
    else:
        out.append("poptorch_model = poptorch.inferenceModel(model, opts)")
    if p.io_tiles:
        out.append(f"opts.TensorLocations.numIOTiles({p.io_tiles})")
    return [_norm(s) for s in out]


def check_snippet(cfg: EvalConfig, snippet: str) -> None:
    p, w = cfg.plan, cfg.workload
    code = _norm(snippet)  # raises SyntaxError when the snippet is not Python
    for statement in expected(cfg):
        assert statement in code, f"missing: {statement}"
    flags = {
        "useOnChipStorage(False)": p.offload_optimizer_state,
        "useReplicatedTensorSharding(True)": p.replicated_tensor_sharding,
        f"minElementsForReplicatedTensorSharding({p.replication_factor})": (
            p.replicated_tensor_sharding
        ),
        "set_overlap_for_input": p.io_tiles > 0,
        "div(255)": p.eight_bit_io,
        "autoRecomputation": p.recompute not in ("none", "auto") and w.mode == "train",
        "recomputationCheckpoint": p.recompute == "every_block" and w.mode == "train",
        "accum_type=torch.float16": p.precision.endswith("16") and w.mode == "train",
        "setPartialsType(torch.float16)": p.partials == "half",
        "poptorch.DataLoaderMode.Async": p.async_dataloader,
        "poptorch.DataLoaderMode.Sync": not p.async_dataloader,
    }
    for fragment, wanted in flags.items():
        assert (fragment in code) == wanted, f"{fragment!r} should appear: {wanted}"
    assert f"num_workers={p.dataloader_workers}" in code
    assert f"batch_size={w.micro_batch_size}" in code
    if w.mode == "train":
        cls = {"sgd": "SGD", "momentum": "SGD", "adam": "Adam", "adamw": "AdamW", "lamb": "LAMB"}
        assert f"poptorch.optim.{cls[w.optimizer]}(" in code
        assert ("momentum=0.9" in code) == (w.optimizer == "momentum")
    if len(p.pipeline.splits):
        assert p.pipeline.schedule in snippet  # named in the comment, with why
    assert max(len(line) for line in snippet.splitlines()) <= 99


PLANS = [
    # The seed tutorial's ladder end point: pipelined on 2 IPUs, 16.16, 8-bit I/O, async loader.
    {
        "precision": "16.16",
        "gradient_accumulation": 8,
        "device_iterations": 4,
        "eight_bit_io": True,
        "async_dataloader": True,
        "dataloader_workers": 8,
        "prefetch_depth": 3,
    },
    {
        "stages": 4,
        "replicas": 2,
        "schedule": "interleaved",
        "precision": "16.32",
        "optimizer": "lamb",
        "gradient_accumulation": 32,
        "recompute": "checkpoints",
        "offload_optimizer_state": True,
        "replicated_tensor_sharding": True,
        "available_memory_proportion": 0.3,
    },
    {
        "stages": 2,
        "schedule": "sharded",
        "precision": "32.32",
        "optimizer": "momentum",
        "recompute": "every_block",
        "io_tiles": 64,
        "micro_batch_size": 16,
    },
    {"stages": 1, "replicas": 4, "mode": "infer", "precision": "16.16", "device_iterations": 32},
]


@pytest.mark.parametrize("plan", PLANS, ids=["seed", "rts-offload", "sharded", "infer"])
def test_snippet_sets_every_knob_with_the_simulated_reasons(plan: dict[str, Any]) -> None:
    cfg = _cfg(**dict(plan))
    result = ipu_tune.evaluate(cfg)
    snippet = poptorch_snippet(cfg, result, _profile())
    check_snippet(cfg, snippet)
    # The docstring quotes the simulation: its bottleneck, throughput and fit.
    doc = " ".join((ast.get_docstring(ast.parse(snippet)) or "").split())
    assert f"bottleneck {result.bottleneck}" in doc
    assert f"{result.throughput:,.1f} samples/s" in doc
    assert ("DOES NOT FIT" in doc) == (not result.fits)
    if cfg.plan.recompute == "every_block":
        (names,) = [
            ast.literal_eval(node.value)
            for node in ast.walk(ast.parse(snippet))
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "checkpoints"
        ]
        assert names == _profile().blocks[1:]  # a checkpoint between every two blocks


def test_model_section_builds_the_profiled_module_and_splits_address_it() -> None:
    cfg = _cfg(stages=4, precision="16.16")
    snippet = poptorch_snippet(cfg)
    head = snippet[: snippet.index("opts = poptorch.Options()")].replace("import poptorch", "")
    namespace: dict[str, Any] = {}
    with torch.device("meta"):  # the real zoo module, without allocating weights
        exec(compile(head, "snippet", "exec"), namespace)
    model = namespace["model"]
    for node in ast.walk(ast.parse(snippet)):
        if isinstance(node, ast.Assign) and "BeginBlock" in ast.unparse(node.value):
            target = ast.unparse(node.targets[0])
            split = next(s for s in cfg.plan.pipeline.splits if module_access(s) == target)
            assert eval(target, {"model": model}) is model.get_submodule(split)


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.ModuleList(nn.Linear(2, 2) for _ in range(13))


class _Bert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = _Encoder()
        self.cls = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 2)))


@pytest.mark.parametrize("path", ["encoder.layer.12", "encoder.layer.0", "cls.1.1", "cls"])
def test_module_access_reaches_the_named_submodule(path: str) -> None:
    model = _Bert()
    assert eval(module_access(path), {"model": model}) is model.get_submodule(path)
    assert module_access("encoder.layer.12") == "model.encoder.layer[12]"
    assert module_access("layer3.8") == "model.layer3[8]"


def test_every_resnet_block_is_addressable() -> None:
    with torch.device("meta"):
        from ipu_tune.models import build_model

        model, _ = build_model(load_config({"model": MODEL}).model)
    for block in _profile().blocks:
        assert eval(module_access(block), {"model": model}) is model.get_submodule(block)


@st.composite
def configs(draw: st.DrawFn) -> EvalConfig:
    stages = draw(st.sampled_from([1, 2, 4, 8]))
    replicas = draw(st.sampled_from([1, 2, 4]))
    mode = draw(st.sampled_from(["train", "infer"]))
    return _cfg(
        stages=stages,
        replicas=replicas,
        mode=mode,
        micro_batch_size=draw(st.integers(1, 512)),
        optimizer=draw(st.sampled_from(["sgd", "momentum", "adam", "adamw", "lamb"])),
        schedule=draw(st.sampled_from(["grouped", "interleaved", "sharded"])),
        precision=draw(st.sampled_from(["32.32", "16.32", "16.16"])),
        gradient_accumulation=1 if mode == "infer" else draw(st.integers(1, 256)),
        device_iterations=draw(st.integers(1, 1000)),
        recompute=draw(st.sampled_from(["none", "checkpoints", "every_block"])),
        available_memory_proportion=draw(st.sampled_from([0.05, 0.1, 0.25, 0.6, 1.0])),
        offload_optimizer_state=draw(st.booleans()),
        replicated_tensor_sharding=replicas > 1 and draw(st.booleans()),
        prefetch_depth=draw(st.integers(1, 8)),
        io_tiles=draw(st.sampled_from([0, 32, 64, 128, 192])),
        eight_bit_io=draw(st.booleans()),
        async_dataloader=draw(st.booleans()),
        dataloader_workers=draw(st.integers(1, 64)),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.booleans())
def test_any_valid_plan_gives_a_snippet_with_its_knobs(cfg: EvalConfig, with_profile: bool) -> None:
    snippet = poptorch_snippet(cfg, None, _profile() if with_profile else None)
    check_snippet(cfg, snippet)
    assert "No simulated result" in snippet
