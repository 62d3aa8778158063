"""`poptorch_options.py`: self-contained, public PopTorch API only, the plan's values, PopTorch's
compile-time rules; run against a recording stand-in of poptorch (and popdist, torchvision)."""

from __future__ import annotations

import ast
import copy
import re
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import ipu_tune
from ipu_tune.config import EvalConfig, load_unvalidated
from ipu_tune.errors import IpuTuneError
from ipu_tune.exports._model_source import module_access, module_path
from ipu_tune.knobs import rate_text
from ipu_tune.models import ModelProfile

from ._export_plans import (
    PLANS,
    host_instances,
    install_frameworks,
    make_config,
    simulated_head,
    stage_amps,
    stages,
)
from ._framework_api import MODEL_API, POPART_PASS_THROUGH_KEYS, POPDIST_API, POPTORCH_API
from ._recorder import Log, run_source
from ._render import poptorch_snippet

RESNET = {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10}


def _profile(cfg: EvalConfig) -> ModelProfile:
    return ipu_tune.profile(cfg.model)


def run_export(
    monkeypatch: pytest.MonkeyPatch, source: str, popdist_env: bool = False
) -> tuple[Log, dict[str, Any]]:
    log = install_frameworks(monkeypatch, popdist_env)
    with torch.device("meta"):  # real modules, no weights
        namespace = run_source(source, "poptorch_options.py")
        if "make_dataloader" in namespace:
            namespace["make_dataloader"](torch.utils.data.TensorDataset(torch.zeros(4)))
    return log, namespace


def _pipelined(log: Log) -> bool:
    return any(
        repr(args[0]).startswith("poptorch.PipelinedExecution")
        for args, _ in log.calls("poptorch.Options.setExecutionStrategy")
    )


def check_poptorch(cfg: EvalConfig, source: str, log: Log, popdist_env: bool,
                   head: tuple[str, int] | None = None) -> None:
    """`head`: where the simulation ran a tied output head (`simulated_head`), for a program
    made with the profile; None: the program places none."""
    p, w = cfg.plan, cfg.workload
    n_stages, training = stages(cfg) + (head is not None), w.mode == "train"
    # Only public API: every attribute read, write and call is listed with its source.
    public = {**POPTORCH_API, **POPDIST_API, **MODEL_API}
    unknown = sorted(path for path in log.paths() if path not in public)
    assert not unknown, f"not in the public API list: {unknown}"
    # Synthetic data, as simulated, is made on the IPU; any other dataset streams from the host.
    assert log.calls("poptorch.Options.enableSyntheticData") == (
        [((True,), {})] if cfg.model.dataset.name == "synthetic" else [])
    for (key, _), _ in log.calls("poptorch.Options._Popart.set"):
        assert key in POPART_PASS_THROUGH_KEYS, key
    # Self-contained: no ipu_tune import (the Poplar SDK cannot install it).
    tree = ast.parse(source)
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import)
            else [node.module or ""] if isinstance(node, ast.ImportFrom)
            else []
        )
    }  # fmt: skip
    assert imported <= {"torch", "torchvision", "transformers", "poptorch", "popdist"} | (
        {cfg.model._target_.split(".")[0]} if cfg.model._target_ else set()
    ), imported
    # Reasons cite public documents only, not ipu-tune's internal seed notes.
    assert not re.search(r"seed (guide|hands-on|tutorial|pipelining)", source, re.I)
    # The plan's values.
    if host_instances(cfg) > 1 and popdist_env:
        (_, kwargs) = log.only_call("popdist.poptorch.Options")
        assert kwargs == {"ipus_per_replica": n_stages}
        assert not log.calls("poptorch.Options.replicationFactor")
    else:
        assert log.only_call("poptorch.Options.replicationFactor")[0] == (p.replication_factor,)
    assert log.only_call("poptorch.Options.deviceIterations")[0] == (p.device_iterations,)
    accumulation = log.calls("poptorch.Options.Training.gradientAccumulation")
    assert accumulation == ([((p.gradient_accumulation,), {})] if training else [])
    amp = log.only_call("poptorch.Options.setAvailableMemoryProportion")[0][0]
    assert amp == {f"IPU{i}": a for i, a in enumerate(stage_amps(cfg))}
    # The partials type of an fp16 model only: fp32 arithmetic accumulates in fp32 whatever it is.
    expected_type = torch.half if p.partials == "half" else torch.float
    set_types = [args for args, _ in log.calls("poptorch.Options.Precision.setPartialsType")]
    assert set_types == ([(expected_type,)] if p.precision.endswith(".16") else [])
    popart = {args[0]: args[1] for args, _ in log.calls("poptorch.Options._Popart.set")}
    assert popart["defaultBufferingDepth"] == p.prefetch_depth
    assert "defaultPrefetchBufferingDepth" not in popart  # the deprecated alias
    merge = popart.get("replicatedCollectivesSettings.mergeAllReduceCollectives")
    assert merge is (True if training and p.replication_factor > 1 else None)
    _check_blocks(cfg, log, head)
    _check_recompute(cfg, log, popart)
    _check_locations(cfg, log)
    # PopTorch's compile-time rules (Compiler.cpp L675-701, L1766-1783; options.py L600).
    if _pipelined(log):
        if training:
            assert p.gradient_accumulation >= n_stages
        else:
            assert p.device_iterations >= n_stages
    tiles = log.calls("poptorch.Options.TensorLocations.numIOTiles")
    assert tiles == ([((p.io_tiles,), {})] if p.io_tiles else [])
    for (n,), _ in tiles:
        assert n % 2 == 0 and 32 <= n <= 192
    if "set_overlap_for_input" in source:
        assert not _pipelined(log) and tiles
        assert [repr(a[0]) for a, _ in log.calls("poptorch.Options.outputMode")] in (
            ["poptorch.OutputMode.All"],
            ["poptorch.OutputMode.Sum"],
        )
    (_, loader_kwargs) = log.only_call("poptorch.DataLoader")
    assert loader_kwargs["batch_size"] == w.micro_batch_size
    assert loader_kwargs["num_workers"] == p.dataloader_workers
    mode = "Async" if p.async_dataloader else "Sync"
    assert repr(loader_kwargs["mode"]) == f"poptorch.DataLoaderMode.{mode}"
    model_call = "poptorch.trainingModel" if training else "poptorch.inferenceModel"
    (args, _) = log.only_call(model_call)
    assert repr(args[1]) == "poptorch.Options"
    assert max(len(line) for line in source.splitlines()) <= 99


def _check_blocks(cfg: EvalConfig, log: Log, head: tuple[str, int] | None) -> None:
    """Each split begins a block on the next IPU, on the very module ipu-tune profiled; a tied
    head begins one on the IPU the simulation ran it on, each block a stage of its own."""
    p = cfg.plan
    calls = log.calls("poptorch.BeginBlock")
    placements = [(module_path(cfg, s), ipu) for ipu, s in enumerate(p.pipeline.splits, 1)]
    if head is not None:
        placements += [(module_path(cfg, ipu_tune.profile(cfg.model).blocks[0]), 0), head]
    assert len(calls) == len(placements)
    strategies = [log.calls(f"poptorch.{s}Execution") for s in ("Pipelined", "Sharded")]
    auto = "AutoIncrement" if head is not None else "SameAsIpu"
    assert all(repr(args[0]) == f"poptorch.AutoStage.{auto}"
               for calls in strategies for args, _ in calls if args)  # one IPU: no stages
    if log.built:
        model = log.built[0]
        for (args, kwargs), (path, ipu) in zip(calls, placements, strict=True):
            assert args[0] is model.get_submodule(path)
            assert kwargs == {"ipu_id": ipu}


def _check_recompute(cfg: EvalConfig, log: Log, popart: dict[str, Any]) -> None:
    p, training = cfg.plan, cfg.workload.mode == "train"
    pipelined = _pipelined(log)
    expected = {
        "auto": None,
        "none": 0,
        "checkpoints": 3 if pipelined else 1,
        "every_block": 3 if pipelined else 1,
    }[p.recompute]
    assert popart.get("autoRecomputation") == (expected if training else None)
    checkpoints = log.built and training and p.recompute in ("checkpoints", "every_block")
    if checkpoints:
        model: nn.Module = log.built[0]
        hooked = {name for name, m in model.named_modules() if m._forward_hooks}
        blocks = [module_path(cfg, b) for b in _profile(cfg).blocks]
        if p.recompute == "every_block":
            assert hooked == set(blocks[:-1])  # every block's output but the model's
        else:
            starts = [module_path(cfg, s) for s in p.pipeline.splits]
            assert hooked == {blocks[blocks.index(s) - 1] for s in starts}


def _check_locations(cfg: EvalConfig, log: Log) -> None:
    p, training = cfg.plan, cfg.workload.mode == "train"
    placed = log.calls("poptorch.Options.TensorLocations.setOptimizerLocation")
    wanted = training and (p.offload_optimizer_state or p.replicated_tensor_sharding)
    assert len(placed) == int(bool(wanted))
    if wanted:
        on_chip = log.only_call("poptorch.TensorLocationSettings.useOnChipStorage")[0]
        assert on_chip == (not p.offload_optimizer_state,)
        rts = log.calls("poptorch.TensorLocationSettings.useReplicatedTensorSharding")
        assert rts == ([((True,), {})] if p.replicated_tensor_sharding else [])


@pytest.mark.parametrize("name", list(PLANS))
@pytest.mark.parametrize("popdist_env", [False, True], ids=["direct", "under-poprun"])
def test_export_runs_public_api_with_the_plans_values(
    name: str, popdist_env: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = make_config(PLANS[name])
    result = ipu_tune.evaluate(cfg)
    source = poptorch_snippet(cfg, result, _profile(cfg))
    log, _ = run_export(monkeypatch, source, popdist_env)
    check_poptorch(cfg, source, log, popdist_env, simulated_head(cfg))
    doc = " ".join((ast.get_docstring(ast.parse(source)) or "").split())
    assert f"bottleneck {result.bottleneck}" in doc
    assert rate_text(result.throughput) in doc


def test_reasons_cite_public_documents_by_section() -> None:
    source = poptorch_snippet(make_config(PLANS["pipelined-bert"]))
    comments = " ".join(line.strip("# ") for line in source.splitlines() if "#" in line)
    for title in (
        'Memory and Performance Optimisation on the IPU, 4.4.1 "Prefetch and prefetch depth"',
        'Memory and Performance Optimisation on the IPU, 5.3 "Activation recomputations"',
        'PyTorch for the IPU: User Guide, "Multi-IPU execution strategies"',
    ):
        assert title in " ".join(comments.split()), title


def test_recompute_auto_leaves_poptorchs_default(monkeypatch: pytest.MonkeyPatch) -> None:
    bert = PLANS["pipelined-bert"]
    raw = {**bert, "plan": {**bert["plan"], "recompute": "none"}}
    source = poptorch_snippet(make_config(raw))
    log, _ = run_export(monkeypatch, source)
    assert ((("autoRecomputation", 0), {})) in log.calls("poptorch.Options._Popart.set")
    cfg = make_config({**raw, "plan": {**raw["plan"], "recompute": "auto"}})
    log, _ = run_export(monkeypatch, poptorch_snippet(cfg))
    assert "autoRecomputation" not in [a[0] for a, _ in log.calls("poptorch.Options._Popart.set")]


def test_a_target_model_is_imported_from_the_users_module(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = make_config(
        {"model": {"_target_": "tests.exports.test_poptorch.tiny_net", "input_shape": [3, 8, 8],
                   "kwargs": {"width": 4}},
         "system": {"num_ipus": 2},
         "plan": {"gradient_accumulation": 4, "pipeline": {"splits": ["head"]}}}
    )  # fmt: skip
    source = poptorch_snippet(cfg)
    assert "from tests.exports.test_poptorch import tiny_net as build_model" in source
    log, namespace = run_export(monkeypatch, source)
    (args, kwargs) = log.only_call("poptorch.BeginBlock")
    assert args[0] is namespace["model"].model.head and kwargs == {"ipu_id": 1}


def tiny_net(width: int = 2) -> nn.Module:
    """A user's own model factory (model._target_)."""
    return _Tiny(width)


class _Tiny(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Conv2d(3, width, 3)
        self.head = nn.Linear(width * 36, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).flatten(1))


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


def _splits(n_stages: int) -> list[str]:
    blocks = ipu_tune.profile(RESNET).blocks
    return [blocks[round(i * len(blocks) / n_stages)] for i in range(1, n_stages)]


@st.composite
def configs(draw: st.DrawFn) -> EvalConfig:
    n_stages = draw(st.sampled_from([1, 2, 4]))
    replicas = draw(st.sampled_from([1, 2, 4]))
    mode = draw(st.sampled_from(["train", "infer"]))
    plan = {
        "replication_factor": replicas,
        "pipeline": {"splits": _splits(n_stages),
                     "schedule": draw(st.sampled_from(["grouped", "interleaved", "sharded"]))},
        "precision": draw(st.sampled_from(["32.32", "16.32", "16.16"])),
        "gradient_accumulation": 1 if mode == "infer" else draw(st.integers(4, 256)),
        "device_iterations": draw(st.integers(4, 1000)),
        "recompute": draw(st.sampled_from(["auto", "none", "checkpoints", "every_block"])),
        "partials": draw(st.sampled_from(["float", "half"])),
        "available_memory_proportion": draw(st.sampled_from([0.05, 0.25, 0.6, 1.0])),
        "available_memory_proportion_per_ipu": draw(st.sampled_from(
            [[], [0.15, *[0.25] * (n_stages - 1)], [0.3] * n_stages])),
        "offload_optimizer_state": draw(st.booleans()),
        "replicated_tensor_sharding": replicas > 1 and draw(st.booleans()),
        "prefetch_depth": draw(st.integers(1, 8)),
        "io_tiles": draw(st.sampled_from([0, 32, 64, 192])),
        "eight_bit_io": draw(st.booleans()),
        "async_dataloader": draw(st.booleans()),
        "dataloader_workers": draw(st.integers(1, 64)),
        "host_instances": draw(st.sampled_from([i for i in (1, 2, 4) if replicas % i == 0])),
    }  # fmt: skip
    return make_config({
        "model": RESNET,
        "workload": {"mode": mode, "micro_batch_size": draw(st.integers(1, 512)),
                     "optimizer": draw(st.sampled_from(["sgd", "momentum", "adam", "adamw",
                                                        "lamb"]))},
        "system": {"num_ipus": n_stages * replicas},
        "plan": plan,
    })  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(cfg=configs(), with_profile=st.booleans(), popdist_env=st.booleans())
def test_any_valid_plan_gives_a_program_with_its_values(
    cfg: EvalConfig, with_profile: bool, popdist_env: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = poptorch_snippet(cfg, None, _profile(cfg) if with_profile else None)
    with monkeypatch.context() as patch:
        log, _ = run_export(patch, source, popdist_env)
        if not with_profile:
            log.built.clear()  # no profile: no checkpoint names to compare
        check_poptorch(cfg, source, log, popdist_env,
                       simulated_head(cfg) if with_profile else None)
    assert "No simulated result" in source


ZOO_SHAPES = {"bert_base": None, "bert_large": None, "mnist_cnn": [1, 28, 28]}


@pytest.mark.parametrize(
    "name",
    ["resnet18", "resnet34", "resnet50", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
     "resnext50", "vit_b_16", "vit_b16", "bert_base", "bert_large", "mnist_cnn"],
)  # fmt: skip
def test_every_zoo_model_is_built_by_its_public_constructor(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model: dict[str, Any] = {"name": name, "num_classes": 10}
    if name.startswith("bert"):
        model = {"name": name, "sequence_length": 128, "num_classes": 30522}
    else:
        model["input_shape"] = ZOO_SHAPES.get(name) or [3, 32, 32]
    blocks = ipu_tune.profile(model).blocks
    split = blocks[len(blocks) // 2]
    cfg = make_config(
        {"model": model, "system": {"num_ipus": 2},
         "plan": {"gradient_accumulation": 4, "recompute": "every_block",
                  "pipeline": {"splits": [split]}}}
    )  # fmt: skip
    source = poptorch_snippet(cfg, None, _profile(cfg))
    log, namespace = run_export(monkeypatch, source)
    built = log.built[0] if log.built else namespace["model"].model  # mnist: defined in the file
    assert "ipu_tune" not in source.replace("ipu-tune", "")
    (args, kwargs), *head = log.calls("poptorch.BeginBlock")
    assert args[0] is built.get_submodule(module_path(cfg, split)) and kwargs == {"ipu_id": 1}
    # BERT's tied MLM head, run on IPU0 as simulated, with the embeddings' block named.
    placed = simulated_head(cfg)
    expected = [] if placed is None else [(module_path(cfg, blocks[0]), 0), placed]
    assert [(a[0], k) for a, k in head] == [(built.get_submodule(m), {"ipu_id": i})
                                            for m, i in expected]
    assert (placed is not None) == name.startswith("bert")
    hooked = {n for n, m in built.named_modules() if m._forward_hooks}
    assert hooked == {module_path(cfg, b) for b in blocks[:-1]}


def test_a_plan_poptorch_would_reject_says_so_in_the_header() -> None:
    bert = PLANS["pipelined-bert"]
    raw = {**bert, "plan": {**bert["plan"], "gradient_accumulation": 2}}
    with pytest.raises(IpuTuneError, match="gradient_accumulation=2: must be >= 4"):
        make_config(raw)  # refused by every entry point; a library caller may skip the check
    cfg = load_unvalidated(copy.deepcopy(raw))
    doc = " ".join((ast.get_docstring(ast.parse(poptorch_snippet(cfg))) or "").split())
    assert "WARNING, PopTorch will reject this plan at compile time" in doc
    assert "gradient accumulation 2 < 4 pipeline stages" in doc
    assert "WARNING" not in poptorch_snippet(make_config(bert))


def test_token_ids_are_sent_as_int32_whatever_the_precision() -> None:
    """A BERT program at FP16.16 said the host sends 2 bytes per input element: its ids are
    int32, as INPUT_DTYPE says beside it."""
    source = poptorch_snippet(make_config(PLANS["pipelined-bert"]))
    assert "INPUT_DTYPE = torch.int32" in source
    assert "The host sends 4 bytes per input element" in " ".join(
        line.strip("# ") for line in source.splitlines())
