"""Render one export of a config through the public exporter registry (as the tuner does)."""

from __future__ import annotations

from ipu_tune.config import EvalConfig
from ipu_tune.exports import EXPORTERS, export_context
from ipu_tune.models import ModelProfile
from ipu_tune.simulator import SimResult


def render(name: str, cfg: EvalConfig, result: SimResult | None = None,
           profile: ModelProfile | None = None) -> str:
    """The text of exporter `name` for the plan of `cfg`."""
    exporter = next(e for e in EXPORTERS if e.name == name)
    return exporter.render(export_context(cfg, result, profile))


def poptorch_snippet(cfg: EvalConfig, result: SimResult | None = None,
                     profile: ModelProfile | None = None) -> str:
    return render("poptorch", cfg, result, profile)


def popart_snippet(cfg: EvalConfig, result: SimResult | None = None) -> str:
    return render("popart", cfg, result)


def tf_snippet(cfg: EvalConfig, result: SimResult | None = None) -> str:
    return render("tensorflow", cfg, result)
