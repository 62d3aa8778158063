"""Every export of an inference plan runs the graph the simulator timed: batch norm folded into
the convolution before it (ipu_tune/simulator/_inference.py). PopTorch folds the model in place
(torch.nn.utils.fusion.fuse_conv_bn_eval) and its outputs are the unfolded model's; PopART and
TensorFlow, whose graphs are the user's, say how to fold them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

import ipu_tune
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.exports import export_context, render_exports

from ._export_plans import install_frameworks
from ._recorder import run_source
from .test_poptorch import check_poptorch, run_export


def resnet(mode: str, name: str = "resnet50") -> EvalConfig:
    return load_config({
        "model": {"name": name, "input_shape": [3, 32, 32], "num_classes": 10},
        "workload": {"mode": mode, "micro_batch_size": 4},
        "system": {"ipu": "mk2", "num_ipus": 2},
        "plan": {"gradient_accumulation": 1 if mode == "infer" else 4, "device_iterations": 4,
                 "pipeline": {"splits": ["layer3.0"], "schedule": "sharded"}},
    })


def texts(cfg: EvalConfig) -> dict[str, str]:
    return render_exports(export_context(cfg, None, ipu_tune.profile(cfg.model)))


FOLD = "model = fold_batch_norms(model.eval())"
NOTE = "Inference: simulated with each batch norm folded into the convolution before it"


def flat(text: str) -> str:
    return " ".join(line.lstrip("# ") for line in text.splitlines())


def test_every_inference_export_of_a_conv_net_folds_its_batch_norms() -> None:
    infer = texts(resnet("infer"))
    assert FOLD in infer["poptorch"]
    assert NOTE in flat(infer["poptorch"])
    assert "fuse_conv_bn_eval" in flat(infer["popart"]) and NOTE in flat(infer["popart"])
    assert "BatchNormalization layers into the Conv2D" in flat(infer["tensorflow"])
    # Training runs batch norm as simulated; a transformer has no conv-norm pair.
    train = texts(resnet("train"))
    assert not any(NOTE in flat(train[k]) for k in ("poptorch", "popart", "tensorflow"))
    bert = load_config({"model": {"name": "bert_base_squad", "sequence_length": 128},
                        "workload": {"mode": "infer", "micro_batch_size": 4},
                        "system": {"ipu": "mk2", "num_ipus": 1},
                        "plan": {"gradient_accumulation": 1}})
    assert not any(NOTE in flat(t) for t in texts(bert).values())


def _randomise_norms(model: torch.nn.Module) -> None:
    """Statistics and affine terms far from the defaults, so that a wrong fold shows."""
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.rand(n, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(n, generator=g) - 0.5)


@pytest.mark.parametrize("name", ["resnet50", "resnext50_32x4d"])
def test_the_poptorch_program_compiles_a_folded_model_with_the_unfolded_outputs(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    cfg = resnet("infer", name)
    source = texts(cfg)["poptorch"]
    log = install_frameworks(monkeypatch, False)
    namespace: dict[str, Any] = run_source(source, "poptorch_options.py")  # real weights, CPU
    ((args, _),) = log.calls("poptorch.inferenceModel")
    compiled = args[0]
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in compiled.modules())
    # The program's fold, on an unfolded model with non-trivial statistics: same outputs.
    with torch.no_grad():
        model = ipu_tune.models.build_model(cfg.model)[0].eval()
        _randomise_norms(model)
        x = torch.randn(2, 3, 32, 32)
        want = model(x)
        folded = namespace["fold_batch_norms"](copy.deepcopy(model))
        assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
        assert torch.allclose(folded(x), want, atol=1e-4, rtol=1e-4)
    # The module names the pipeline's blocks address are kept.
    assert dict(folded.named_children()).keys() == dict(model.named_children()).keys()


def test_the_folded_program_keeps_poptorchs_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = resnet("infer")
    source = texts(cfg)["poptorch"]
    log, _ = run_export(monkeypatch, source)  # on the meta device, as every program is checked
    check_poptorch(cfg, source, log, False)
