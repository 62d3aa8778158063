"""run_with_optimum.py runs the simulated inference plan: not optimum's `pipeline(...)`, which
sets inference_device_iterations and inference_replication_factor to 1 and is fed one sample
(optimum/graphcore/pipelines/__init__.py, get_poplar_executor), but the same calls keeping the
plan's fields, on one combined batch. The training program of an 8-bit-I/O plan says why it
feeds float pixels."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig
from ipu_tune.exports import render_ipu_config, render_run_with_optimum
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import ExecutionPlan

from ._framework_api import POPTORCH_API
from .test_ipu_config import optimum_source

VIT = EvalConfig(model=ModelConfig(name="hf", hf=HfConfig(
    model_type="vit", task="image-classification",
    config={"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
            "num_attention_heads": 2})))  # fmt: skip
INFER = ExecutionPlan(mode="infer", micro_batch_size=2, precision="32.32", device_iterations=3,
                      replication_factor=2, splits=("vit.layers.1",), schedule="sharded")


@pytest.fixture(scope="module")
def vit() -> ModelProfile:
    return profile_model(VIT.model)


class Calls:
    """What the program asked of optimum-graphcore and PopTorch, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def modules(self) -> dict[str, types.ModuleType]:
        calls = self.log

        class IPUConfig:
            @classmethod
            def from_pretrained(cls, folder: str) -> IPUConfig:
                calls.append(("IPUConfig.from_pretrained", folder))
                return cls()

            def __setattr__(self, name: str, value: Any) -> None:  # a field overridden
                calls.append(("set", name))

            def eval(self) -> IPUConfig:
                calls.append(("IPUConfig.eval", None))
                return self

            def to_options(self, for_inference: bool = False) -> str:
                calls.append(("IPUConfig.to_options", for_inference))
                return "opts"

        def to_pipelined(model: torch.nn.Module, ipu_config: IPUConfig) -> torch.nn.Module:
            calls.append(("to_pipelined", None))
            model.parallelize = lambda: calls.append(("parallelize", None))  # type: ignore[assignment]
            return model

        def inference_model(model: torch.nn.Module, opts: str) -> Any:
            calls.append(("poptorch.inferenceModel", opts))

            def run(**inputs: torch.Tensor) -> Any:
                calls.append(("call", {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()}))
                return model(**inputs)  # the model runs on CPU as the IPU would run it

            return run

        optimum = types.ModuleType("optimum")
        graphcore = types.ModuleType("optimum.graphcore")
        graphcore.IPUConfig = IPUConfig  # type: ignore[attr-defined]
        utils = types.ModuleType("optimum.graphcore.modeling_utils")
        utils.to_pipelined = to_pipelined  # type: ignore[attr-defined]
        poptorch = types.ModuleType("poptorch")
        poptorch.inferenceModel = inference_model  # type: ignore[attr-defined]
        return {"optimum": optimum, "optimum.graphcore": graphcore,
                "optimum.graphcore.modeling_utils": utils, "poptorch": poptorch}


def run_program(text: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> Calls:
    calls = Calls()
    for name, module in calls.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.chdir(folder)
    path = str(folder / "run_with_optimum.py")  # beside its ipu_config.json, as written
    exec(compile(text, path, "exec"), {"__name__": "__main__", "__file__": path})
    return calls


@pytest.mark.parametrize("eight_bit", [False, True])
def test_the_inference_program_runs_the_plans_batch_device_iterations_and_replicas(
    vit: ModelProfile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eight_bit: bool
) -> None:
    plan = replace(INFER, eight_bit_io=eight_bit)
    (tmp_path / "ipu_config.json").write_text(render_ipu_config(plan, vit, VIT))
    text = render_run_with_optimum(plan, vit, VIT)
    code = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert "pipeline(" not in code
    calls = run_program(text, tmp_path, monkeypatch)
    names = [n for n, _ in calls.log]
    # get_poplar_executor's order, without its lines overriding the inference_* fields.
    assert names == ["IPUConfig.from_pretrained", "IPUConfig.eval", "to_pipelined",
                     "parallelize", "IPUConfig.to_options", "poptorch.inferenceModel", "call"]
    assert ("IPUConfig.to_options", True) in calls.log
    batch = plan.micro_batch_size * plan.device_iterations * plan.replication_factor
    ((_, inputs),) = [c for c in calls.log if c[0] == "call"]
    dtype = torch.uint8 if eight_bit else torch.float32
    assert inputs == {"pixel_values": ((batch, *vit.input_shape), dtype)}


def test_an_fp16_plan_runs_half_weights_and_half_inputs(vit: ModelProfile) -> None:
    text = render_run_with_optimum(replace(INFER, precision="16.16"), vit, VIT)
    assert "model.half()" in text and ".to(torch.half)" in text


def test_every_name_the_inference_program_uses_is_in_optimum_or_poptorchs_api(
    vit: ModelProfile,
) -> None:
    text = render_run_with_optimum(INFER, vit, VIT)
    assert "poptorch.inferenceModel" in text and "poptorch.inferenceModel" in POPTORCH_API
    assert "poptorch.inferenceModel(model.eval(), opts)" in ast.unparse(
        optimum_source("optimum/graphcore/pipelines/__init__.py"))
    utils = optimum_source("optimum/graphcore/modeling_utils.py")
    defined = {n.name for n in ast.walk(utils) if isinstance(n, ast.FunctionDef)}
    assert {"to_pipelined", "parallelize"} <= defined
    config = optimum_source("optimum/graphcore/ipu_configuration.py")
    cls = next(n for n in ast.walk(config) if isinstance(n, ast.ClassDef) and n.name == "IPUConfig")
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assert {"eval", "to_options"} <= methods  # from_pretrained: its base class's
    assert "from optimum.graphcore.modeling_utils import to_pipelined" in text


def test_an_eight_bit_training_program_says_why_it_feeds_float_pixels(vit: ModelProfile) -> None:
    plan = replace(INFER, mode="train", gradient_accumulation=4, schedule="grouped")
    assert "8-bit I/O" not in render_run_with_optimum(plan, vit, VIT)
    text = render_run_with_optimum(replace(plan, eight_bit_io=True), vit, VIT)
    assert "8-bit I/O: the plan was simulated with uint8 pixels" in text
    assert "this program feeds float pixels" in text
