"""The optimum-graphcore exports of a Transformers model's plan: `ipu_config.json` and the
`run_with_optimum.py` that loads it (optimum-graphcore runs Transformers models only, so other
models get neither file)."""

from __future__ import annotations

from ipu_tune.config import ModelConfig
from ipu_tune.models import hf_identity, hf_source

from ._context import ExportContext
from ._ipu_config import render_ipu_config, render_run_with_optimum
from ._schedules import OPTIMUM

__all__ = ["IpuConfigExporter", "RunWithOptimumExporter", "is_transformers_model",
           "optimum_runs"]


# Heads optimum-graphcore 0.7.1 cannot run: it has no feature-extraction pipeline and pipelines
# no tower (`models/*/modeling_*.py` register three base models: BERT, MPNet, T5's encoder),
# and it pins transformers 4.29.2, which predates the image-text-to-text class.
_NOT_IN_OPTIMUM = ("feature-extraction", "image-text-to-text")


def optimum_runs(model: ModelConfig) -> bool:
    """The model is built through Transformers (`model.hf`, or a zoo size of `HUB_MODELS`)
    with a head optimum-graphcore 0.7.1 can run (`_NOT_IN_OPTIMUM`). The zoo's own BERT and
    the vision models are ipu-tune's restatements, not Transformers classes: no optimum files."""
    source = hf_source(model)
    return source is not None and hf_identity(source)[1] not in _NOT_IN_OPTIMUM


def is_transformers_model(ctx: ExportContext) -> bool:
    """`optimum_runs`, and the model was profiled: otherwise it gets neither file."""
    return ctx.profile is not None and optimum_runs(ctx.config.model)


class IpuConfigExporter:
    """optimum-graphcore 0.7.1's `IPUConfig` of the plan, as `ipu_config.json`."""

    name = "ipu_config"
    file_name = "ipu_config.json"
    label = "optimum-graphcore IPUConfig"
    schedules = OPTIMUM  # the same plan as run_with_optimum.py, whose header states a stand-in

    def applies(self, ctx: ExportContext) -> bool:
        return is_transformers_model(ctx)

    def render(self, ctx: ExportContext) -> str:
        assert ctx.profile is not None  # `applies` checked it
        return render_ipu_config(ctx.plan, ctx.profile, ctx.config)


class RunWithOptimumExporter:
    """A dozen-line program running the plan with optimum-graphcore from `ipu_config.json`."""

    name = "optimum"
    file_name = "run_with_optimum.py"
    label = "optimum-graphcore program"
    schedules = OPTIMUM

    def applies(self, ctx: ExportContext) -> bool:
        return is_transformers_model(ctx)

    def render(self, ctx: ExportContext) -> str:
        assert ctx.profile is not None  # `applies` checked it
        return render_run_with_optimum(ctx.plan, ctx.profile, ctx.config,
                                       *ctx.stand_in_lines(OPTIMUM))
