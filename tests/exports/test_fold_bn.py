"""Every export of an inference plan runs the graph the simulator timed: the batch norms of
`ipu_tune.models.conv_norm_folds` folded into the convolution before them
(ipu_tune/simulator/_inference.py). PopTorch lists those pairs by module name and folds them in
place (torch.nn.utils.fusion.fuse_conv_bn_eval), and its outputs are the unfolded model's;
PopART and TensorFlow, whose graphs are the user's, say how to fold them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn

import ipu_tune
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.exports import export_context, render_exports
from ipu_tune.simulator._inference import inference_graph

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
NOTE = "Inference: simulated with each batch norm (exactly BatchNorm1d/2d/3d) run right after"


def flat(text: str) -> str:
    return " ".join(line.lstrip("# ") for line in text.splitlines())


def test_every_inference_export_of_a_conv_net_folds_its_batch_norms() -> None:
    infer = texts(resnet("infer"))
    assert FOLD in infer["poptorch"]
    assert NOTE in flat(infer["poptorch"])
    assert "fuse_conv_bn_eval" in flat(infer["popart"]) and NOTE in flat(infer["popart"])
    assert "BatchNormalization layer of your Keras model into its Conv2D" in flat(
        infer["tensorflow"])
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


# Models whose conv-norm pairs are not all their registration-adjacent modules. Each has a
# conv-bn stem that does fold, so the program folds something.
class _ConvBn(nn.Module):
    """A conv and a batch norm registered in that order; each block below runs them its way."""

    def __init__(self, cin: int = 8, norm: type[nn.BatchNorm2d] = nn.BatchNorm2d) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, 8, 3, padding=1)
        self.bn = norm(8)


class _Stem(_ConvBn):
    def __init__(self) -> None:
        super().__init__(cin=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class _PreNorm(_ConvBn):
    """conv registered before bn, but bn normalises the conv's input (pre-activation)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(torch.relu(self.bn(x)))


class _BatchNormAct(nn.BatchNorm2d):
    """timm's BatchNormAct2d: a BatchNorm2d subclass with its activation inside."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(super().forward(x))


class _ConvBnAct(_ConvBn):
    def __init__(self) -> None:
        super().__init__(norm=_BatchNormAct)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x)) - 0.5


class _Skip(_ConvBn):
    """The conv's output feeds the bn and a skip connection."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.bn(y) + y


class _BnFirst(nn.Module):
    """bn registered before the conv it follows in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class _Net(nn.Module):
    def __init__(self, block: type[nn.Module]) -> None:
        super().__init__()
        self.stem = _Stem()
        self.block1 = block()
        self.block2 = block()
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block2(self.block1(self.stem(x))).mean((2, 3)))


def pre_norm_net() -> nn.Module:
    return _Net(_PreNorm)


def bn_act_net() -> nn.Module:
    return _Net(_ConvBnAct)


def skip_net() -> nn.Module:
    return _Net(_Skip)


def bn_first_net() -> nn.Module:
    return _Net(_BnFirst)


STEM = [("stem.conv", "stem.bn")]
BN_FIRST = [*STEM, ("block1.conv", "block1.bn"), ("block2.conv", "block2.bn")]


def _target(factory: str) -> EvalConfig:
    return load_config({
        "model": {"_target_": f"tests.exports.test_fold_bn.{factory}", "input_shape": [3, 8, 8]},
        "workload": {"mode": "infer", "micro_batch_size": 4},
        "system": {"ipu": "mk2", "num_ipus": 1},
        "plan": {"gradient_accumulation": 1},
    })


@pytest.mark.parametrize(("cfg", "pairs"), [
    pytest.param(_target("pre_norm_net"), STEM, id="pre-norm"),
    pytest.param(_target("bn_act_net"), STEM, id="BatchNorm2d-subclass-with-activation"),
    pytest.param(_target("skip_net"), STEM, id="conv-output-also-a-skip"),
    pytest.param(_target("bn_first_net"), BN_FIRST, id="bn-registered-before-its-conv"),
    pytest.param(resnet("infer"), None, id="resnet50"),
])  # fmt: skip
def test_the_program_folds_exactly_the_pairs_the_simulation_folded(
    monkeypatch: pytest.MonkeyPatch, cfg: EvalConfig, pairs: list[tuple[str, str]] | None
) -> None:
    profile = ipu_tune.profile(cfg.model)
    source = render_exports(export_context(cfg, None, profile))["poptorch"]
    install_frameworks(monkeypatch, False)
    namespace: dict[str, Any] = run_source(source, "poptorch_options.py")
    with torch.no_grad():
        model = ipu_tune.models.build_model(cfg.model)[0].eval()
        _randomise_norms(model)
        x = torch.randn(2, *cfg.model.input_shape)
        want = model(x)
        folded = namespace["fold_batch_norms"](copy.deepcopy(model))
        assert torch.allclose(folded(x), want, atol=1e-4, rtol=1e-4)
    # The simulator dropped exactly the norms the program folds, and those the program lists.
    listed = [tuple(p) for p in namespace["FOLD"]]
    dropped = inference_graph(profile).dropped
    simulated = {op.name for op, d in zip(profile.ops, dropped, strict=True)
                 if d and op.kind == "norm"}
    assert simulated == {bn for _, bn in listed}
    assert pairs is None or listed == pairs
    kept = {n for n, m in folded.named_modules() if type(m) is nn.BatchNorm2d}
    assert kept.isdisjoint(simulated) and len(listed) == len(set(listed))
    if pairs is None:  # the zoo's ResNet: every norm follows its own conv
        assert not kept and len(listed) == 53
