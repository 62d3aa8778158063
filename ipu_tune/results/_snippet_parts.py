"""Pieces of the PopTorch snippet: the "why" sentences, model, input pipeline and optimizer.

Kept apart from `_poptorch.py` (the options themselves) so each file stays short.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

from ipu_tune.config import EvalConfig
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import SimResult

__all__ = ["Facts", "input_lines", "model_lines", "optimizer_lines"]

_MIB = float(1 << 20)
# Zoo models built in torchvision's layout under torchvision's own builder name.
_TORCHVISION = re.compile(r"^resnet(18|34|50|101|152)$")
# Adam-family accumulator types of the seed hands-on session (fp16 model, "16.16").
_FP16_ADAM = (
    "loss_scaling=1000, accum_type=torch.float16,"
    " first_order_momentum_accum_type=torch.float16,"
    " second_order_momentum_accum_type=torch.float32"
)


class Facts:
    """Sentences about the simulated result for the comments; empty without a result."""

    def __init__(self, plan: ExecutionPlan, result: SimResult | None) -> None:
        self.plan = plan
        self.r = result

    def _ms(self, phase: str) -> float:
        assert self.r is not None
        return float(self.r.phases.get(phase, 0.0)) * 1e3

    def summary(self) -> str:
        r = self.r
        if r is None:
            return "No simulated result was given, so the comments give no figures."
        if not r.memory:
            return f"Simulated: fits={r.fits}, {r.throughput:.1f} samples/s."
        full = max(r.memory, key=lambda m: m.total_bytes)
        state = "fits" if r.fits else f"DOES NOT FIT ({r.reason})"
        return (
            f"Simulated: {r.throughput:,.1f} samples/s, step {r.step_time_s * 1e3:.2f} ms,"
            f" bottleneck {r.bottleneck}; {state}; peak {full.total_bytes / _MIB:.0f} MiB of"
            f" {full.limit_bytes / _MIB:.0f} MiB on IPU{full.ipu}."
        )

    def phase_sentence(self, phase: str) -> str:
        if self.r is None:
            return ""
        ms = self._ms(phase)
        step = self.r.step_time_s * 1e3
        share = 100.0 * ms / step if step > 0 else 0.0
        tail = "; it is the bottleneck" if self.r.bottleneck == phase else ""
        return f"Simulated {phase}: {ms:.3f} ms of the {step:.2f} ms step ({share:.0f}%){tail}."

    def ga_sentence(self) -> str:
        if self.r is None:
            return ""
        return (
            f"Simulated pipeline ramp {self._ms('pipeline_ramp'):.3f} ms and weight update"
            f" {self._ms('weight_update'):.3f} ms per step."
        )

    def stage_balance(self) -> str:
        if self.r is None or not self.r.stages:
            return ""
        times = ", ".join(
            f"{(s.forward_s + s.backward_s + s.recompute_s) * 1e3:.2f}" for s in self.r.stages
        )
        return f"Simulated ms per micro-batch by stage: {times} (the longest bounds the step)."

    def headroom_sentence(self) -> str:
        if self.r is None or not self.r.memory:
            return ""
        room = min(self.r.memory, key=lambda m: m.limit_bytes - m.total_bytes)
        left = (room.limit_bytes - room.total_bytes) / _MIB
        return f"Simulated headroom: {left:.0f} MiB on the fullest IPU (IPU{room.ipu})."

    def category_sentence(self, category: str) -> str:
        if self.r is None or not self.r.memory:
            return ""
        top = max(self.r.memory, key=lambda m: m.categories.get(category, 0))
        mib = top.categories.get(category, 0) / _MIB
        return f"Simulated {category}: {mib:.1f} MiB on IPU{top.ipu}."

    def why_sharded(self) -> str:
        return "only one IPU works at a time, so throughput is low; " + (
            self.headroom_sentence() or "chosen for memory, or for debugging."
        )

    def recompute_sentence(self) -> str:
        if self.r is None:
            return ""
        extra = sum(s.recompute_s for s in self.r.stages) * 1e3
        return f"Simulated recompute: {extra:.3f} ms per micro-batch over all stages. " + (
            self.category_sentence("recompute_checkpoints")
        )

    def offload_sentence(self, on: bool) -> str:
        if self.r is None:
            return ""
        if on:
            return "Frees the optimizer state from IPU memory. " + self.phase_sentence(
                "streaming_memory"
            )
        return "Kept on chip, no streaming traffic. " + self.category_sentence("optimizer_state")

    def rts_sentence(self, plan: ExecutionPlan) -> str:
        if plan.replicated_tensor_sharding:
            return (
                f"Optimizer state split across the {plan.replication_factor} replicas"
                " (seed guide 4.7, like ZeRO). " + self.category_sentence("optimizer_state")
            )
        if plan.replication_factor == 1:
            return "Needs replication; this plan has one replica."
        return "Every replica keeps the whole optimizer state. " + self.headroom_sentence()

    def io_sentence(self, eight_bit: bool) -> str:
        size = "1 byte" if eight_bit else ("2 bytes" if self.plan.input_fp16 else "4 bytes")
        base = f"The host sends {size} per input element (seed guide 4.4.3). "
        if eight_bit:
            base = (
                "Sends 1 byte per pixel instead of 2 (fp16) or 4 (fp32) and moves"
                " normalisation onto the IPU. "
            )
        return base + self.phase_sentence("host_io")


def _plain(value: Any) -> Any:
    """JSON-like copy of a config value (OmegaConf containers have no literal repr)."""
    return json.loads(json.dumps(value, default=str))


def model_lines(cfg: EvalConfig) -> list[str]:
    m = cfg.model
    kwargs = _plain(dict(m.kwargs))
    if m._target_:
        module, _, fn = m._target_.rpartition(".")
        return [
            f"from {module} import {fn} as build_model",
            "",
            f"model = build_model({_kwargs(kwargs)})",
        ]
    # The ipu-tune zoo builds the very module it profiled, so the split names below exist.
    out = [
        "from ipu_tune.config import ModelConfig",
        "from ipu_tune.models import build_model",
        "",
    ]
    name = str(m.name)
    if _TORCHVISION.match(name):
        kwargs.setdefault("num_classes", m.num_classes)
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        out.append(
            f"# {name} has torchvision's module names: torchvision.models.{name}({args}) takes"
            " the same BeginBlock placements."
        )
    return [
        *out,
        f"model, _input_kind = build_model(ModelConfig({_kwargs(_model_dict(cfg))}))",
    ]


def _literal(value: Any) -> str:
    """Python literal of a JSON-like value, strings in double quotes (ruff's style)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _kwargs(values: dict[str, Any]) -> str:
    """Call arguments `a=1, b="x"`; `**{...}` when a key is not a Python name."""
    plain = _plain(values)
    if all(k.isidentifier() and not keyword.iskeyword(k) for k in plain):
        return ", ".join(f"{k}={_literal(v)}" for k, v in plain.items())
    return "**" + _literal(plain)


def _model_dict(cfg: EvalConfig) -> dict[str, Any]:
    m = cfg.model
    out: dict[str, Any] = {"name": m.name, "num_classes": m.num_classes}
    out["input_shape"] = list(m.input_shape)
    if m.sequence_length is not None:
        out["sequence_length"] = m.sequence_length
    if m.kwargs:
        out["kwargs"] = dict(m.kwargs)
    return out


def _is_image(cfg: EvalConfig, profile: ModelProfile | None) -> bool:
    if profile is not None:
        return profile.input_kind == "image"
    return cfg.model.sequence_length is None


def input_lines(
    cfg: EvalConfig, plan: ExecutionPlan, profile: ModelProfile | None, facts: Facts
) -> list[str]:
    """Input dtype, the on-IPU input wrapper, the loss wrapper, the model cast, the loader."""
    in_dtype = "torch.float16" if plan.input_fp16 else "torch.float32"
    model_dtype = "half" if plan.model_fp16 else "float"
    image = _is_image(cfg, profile)
    eight_bit = plan.eight_bit_io and image
    out = [
        f"# Precision {plan.precision}: input {in_dtype}, model {model_dtype} (seed hands-on:"
        " fp16 halves the bytes of weights and activations and speeds up conv/matmul).",
        f"INPUT_DTYPE = {in_dtype}",
        f"# 8-bit I/O: {plan.eight_bit_io}. " + facts.io_sentence(eight_bit),
    ]
    if plan.eight_bit_io and not image:
        out.append("# (8-bit I/O applies to image pixels; this model reads token ids.)")
    if eight_bit or plan.io_tiles:
        channels = cfg.model.input_shape[0] if cfg.model.input_shape else 3
        mean = [0.485, 0.456, 0.406] if channels == 3 else [0.5] * channels
        std = [0.229, 0.224, 0.225] if channels == 3 else [0.5] * channels
        out += [
            "",
            "",
            "class IpuInput(torch.nn.Module):",
            '    """What happens to the input on the IPU before the model (seed',
            '    ModelWithNormalization)."""',
            "",
            "    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:",
            "        super().__init__()",
            "        self.model = model",
            "        self.dtype = dtype",
            "        # Dataset statistics (ImageNet's here): replace them with your own.",
            f'        self.register_buffer("mean", torch.tensor({mean!r}).view(-1, 1, 1))',
            f'        self.register_buffer("std", torch.tensor({std!r}).view(-1, 1, 1))',
            "",
            "    def forward(self, img: torch.Tensor) -> torch.Tensor:",
        ]
        if plan.io_tiles:
            out.append(
                "        img = poptorch.set_overlap_for_input("
                "img, poptorch.OverlapMode.OverlapDeviceIterationLoop)"
            )
        if eight_bit:
            out += [
                "        # uint8 pixels arrive from the host; cast and normalise here.",
                "        x = img.to(self.dtype).div(255)",
                "        x = (x - self.mean.to(self.dtype)) / self.std.to(self.dtype)",
                "        return self.model(x)",
            ]
        else:
            out.append("        return self.model(img)")
        out += ["", "", "model = IpuInput(model, INPUT_DTYPE)"]
    if plan.training:
        out += [
            "",
            "",
            "class ModelWithLoss(torch.nn.Module):",
            "    def __init__(self, model: torch.nn.Module, criterion: torch.nn.Module) -> None:",
            "        super().__init__()",
            "        self.model = model",
            "        self.criterion = criterion",
            "",
            "    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None):",
            "        out = self.model(x)",
            "        if labels is None:",
            "            return out",
            "        return out, self.criterion(out, labels)",
            "",
            "",
            "model = ModelWithLoss(model, torch.nn.CrossEntropyLoss())",
        ]
    out.append(f"model = model.{model_dtype}()")
    if plan.partials == "half":
        out += [
            '# fp16 partials: "each time the numerical precision is halved, the execution speed'
            ' of matmul and convolution operations is doubled" (seed hands-on).',
            "opts.Precision.setPartialsType(torch.float16)",
        ]
    mode = "Async" if plan.async_dataloader else "Sync"
    host = (
        "PILToTensor only (uint8, no ConvertImageDtype/Normalize)"
        if eight_bit
        else (f"tensors of {in_dtype}")
    )
    out += [
        "",
        f"# Data loader: {mode.lower()} with {plan.dataloader_workers} worker(s);"
        " an asynchronous loader overlaps host preprocessing with the device."
        f" {facts.phase_sentence('host_preprocess')}",
        f"# The dataset yields {host}.",
        "",
        "",
        "def make_dataloader(dataset: torch.utils.data.Dataset) -> poptorch.DataLoader:",
        "    return poptorch.DataLoader(",
        "        opts,",
        "        dataset,",
        f"        batch_size={plan.micro_batch_size},  # the micro-batch",
        "        shuffle=True,",
        "        drop_last=True,",
        f"        num_workers={plan.dataloader_workers},",
        f"        mode=poptorch.DataLoaderMode.{mode},",
        "    )",
    ]
    return out


def optimizer_lines(cfg: EvalConfig, plan: ExecutionPlan, facts: Facts) -> list[str]:
    if not plan.training:
        return ["poptorch_model = poptorch.inferenceModel(model, opts)"]
    fp16 = plan.model_fp16
    name = plan.optimizer
    if name in ("adam", "adamw", "lamb"):
        cls = {"adam": "Adam", "adamw": "AdamW", "lamb": "LAMB"}[name]
        extra = f", {_FP16_ADAM}" if fp16 else ""
        call = f"poptorch.optim.{cls}(model.parameters(), lr=1e-3{extra})"
    else:
        momentum = ", momentum=0.9" if name == "momentum" else ""
        extra = ""
        if fp16:
            extra = ", loss_scaling=1000, accum_type=torch.float16"
            if name == "momentum":
                extra += ", velocity_accum_type=torch.float16"
        call = f"poptorch.optim.SGD(model.parameters(), lr=0.01{momentum}{extra})"
    why = (
        "fp16 accumulators with loss scaling for the half-precision model (seed hands-on)."
        if fp16
        else "fp32 model: PopTorch's default accumulator types."
    )
    return [
        "",
        f"# Optimizer {name}: {why} {facts.category_sentence('optimizer_state')}",
        f"optimizer = {call}",
        "poptorch_model = poptorch.trainingModel(model, opts, optimizer=optimizer)",
    ]
