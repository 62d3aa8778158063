"""The optimum-graphcore exports of a Transformers model's plan: `ipu_config.json` and the
`run_with_optimum.py` that loads it (optimum-graphcore runs Transformers models only, so other
models get neither file)."""

from __future__ import annotations

from ipu_tune.config import ModelConfig
from ipu_tune.models import hf_identity, hf_source

from ._context import ExportContext
from ._ipu_config import render_ipu_config, render_run_with_optimum
from ._schedules import OPTIMUM

__all__ = ["OPTIMUM_PIPELINED", "IpuConfigExporter", "RunWithOptimumExporter",
           "is_transformers_model", "optimum_note", "optimum_runs"]


# The Transformers classes optimum-graphcore 0.7.1 pipelines, by model type and ipu-tune task:
# its `@register(...)` decorators (optimum/graphcore/models/*/modeling_*.py). `to_pipelined`
# refuses any other class, so another model gets neither file. Not listed: its base models
# (BertModel, MPNetModel, T5EncoderModel: ipu-tune's feature extraction runs no optimum
# pipeline), multiple choice and pre-training heads (BertForPreTraining's next-sentence head,
# Wav2Vec2ForPreTraining: no ipu-tune task), GroupBERT and LXMERT (no Transformers model type
# ipu-tune builds them from).
OPTIMUM_PIPELINED: dict[str, frozenset[str]] = {
    "bart": frozenset({"seq2seq-lm", "sequence-classification"}),
    "bert": frozenset({"masked-lm", "question-answering", "sequence-classification",
                       "token-classification"}),
    "convnext": frozenset({"image-classification"}),
    "deberta": frozenset({"masked-lm", "question-answering", "sequence-classification",
                          "token-classification"}),
    "distilbert": frozenset({"masked-lm", "question-answering", "sequence-classification",
                             "token-classification"}),
    "gpt2": frozenset({"causal-lm", "sequence-classification", "token-classification"}),
    "hubert": frozenset({"ctc", "audio-classification"}),
    "mpnet": frozenset({"masked-lm"}),
    "mt5": frozenset({"seq2seq-lm"}),
    "roberta": frozenset({"masked-lm", "question-answering", "sequence-classification",
                          "token-classification"}),
    "t5": frozenset({"seq2seq-lm"}),
    "vit": frozenset({"image-classification"}),
    "wav2vec2": frozenset({"ctc"}),
    "whisper": frozenset({"speech-seq2seq"}),
}


def optimum_runs(model: ModelConfig) -> bool:
    """The model is built through Transformers (`model.hf`, or a zoo size of `HUB_MODELS`) as
    a class optimum-graphcore 0.7.1 pipelines (`OPTIMUM_PIPELINED`). The zoo's own BERT and
    the vision models are ipu-tune's restatements, not Transformers classes: no optimum files."""
    source = hf_source(model)
    if source is None:
        return False
    model_type, task = hf_identity(source)
    return task in OPTIMUM_PIPELINED.get(model_type, frozenset())


def optimum_note(model: ModelConfig) -> str | None:
    """One line for a Transformers model that gets no optimum-graphcore files: the head it was
    built with (a config.json's "architectures" decide it when `model.hf.task` is unset: a
    base model, `BartModel`, is trained on a stand-in loss of its output) and the heads
    optimum-graphcore 0.7.1 pipelines for its type. None: optimum runs it."""
    source = hf_source(model)
    if source is None:  # not built through Transformers: optimum-graphcore runs none of it
        return ("model: not a Transformers model; no ipu_config.json or run_with_optimum.py: "
                "optimum-graphcore 0.7.1 pipelines only the Transformers classes it registers "
                "(docs/huggingface.md)")
    if optimum_runs(model):
        return None
    model_type, task = hf_identity(source)
    base = (" (a base model: it trains on a stand-in loss of its output)"
            if task == "feature-extraction" else "")
    heads = sorted(OPTIMUM_PIPELINED.get(model_type, ()))
    how = (f"it pipelines {model_type} as {', '.join(heads)}: model.hf.task={heads[0]} for "
           "that head" if heads else "it pipelines only the Transformers classes it registers "
           "(docs/huggingface.md)")
    return (f"model: {model_type} as {task}{base}; no ipu_config.json or run_with_optimum.py: "
            f"optimum-graphcore 0.7.1 runs no such class; {how}")


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
