"""Plans the framework exports are checked on, and the stand-in model constructors.

The torchvision and transformers stand-ins build ipu-tune's own restatement of those models
(ipu_tune.models, module for module as torchvision / Hugging Face name them) from the keyword
arguments of the public constructor, so the exported program's BeginBlock placements and
checkpoints are checked against real torch modules.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from torch import nn

import ipu_tune
from ipu_tune.config import EvalConfig, ModelConfig, load_config
from ipu_tune.models import build_model

from ._recorder import Log, install

# The best plan of the default study (`python -m ipu_tune`, resnet101 on 2 x mk2, 60 trials).
DEFAULT_STUDY: dict[str, Any] = {
    "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
    "workload": {"mode": "train", "micro_batch_size": 64, "optimizer": "adamw"},
    "system": {"ipu": "mk2", "num_ipus": 2, "hosts": 1},
    "plan": {
        "precision": "16.16", "gradient_accumulation": 57, "device_iterations": 38,
        "replication_factor": 2, "pipeline": {"splits": [], "schedule": "grouped"},
        "recompute": "auto", "available_memory_proportion": 0.7,
        "offload_optimizer_state": True, "replicated_tensor_sharding": True,
        "prefetch_depth": 2, "io_tiles": 0, "eight_bit_io": True, "async_dataloader": True,
        "dataloader_workers": 6, "host_instances": 1, "partials": "float",
    },
}  # fmt: skip
# BERT-Base pipelined over 4 IPUs, recomputation at every block, optimizer state offloaded.
PIPELINED_BERT: dict[str, Any] = {
    "model": {"name": "bert_base", "sequence_length": 128, "num_classes": 30522,
              "kwargs": {"vocab_size": 30522}},
    "workload": {"mode": "train", "micro_batch_size": 8, "optimizer": "lamb"},
    "system": {"ipu": "mk2", "num_ipus": 4, "hosts": 1},
    "plan": {
        "precision": "16.16", "gradient_accumulation": 64, "device_iterations": 2,
        "replication_factor": 1,
        "pipeline": {"splits": ["encoder.layer.3", "encoder.layer.7", "encoder.layer.11"],
                     "schedule": "grouped"},
        "recompute": "every_block", "available_memory_proportion": 0.3,
        "offload_optimizer_state": True, "prefetch_depth": 3, "partials": "half",
    },
}  # fmt: skip
# ResNet-50 data-parallel on an IPU-POD16: 2 servers, 4 PopRun instances, 16 replicas.
MULTI_HOST: dict[str, Any] = {
    "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000},
    "workload": {"mode": "train", "micro_batch_size": 8, "optimizer": "sgd"},
    "system": {"ipu": "mk2", "num_ipus": 16, "hosts": 2},
    "plan": {
        "precision": "16.16", "gradient_accumulation": 8, "device_iterations": 16,
        "replication_factor": 16, "replicated_tensor_sharding": True, "prefetch_depth": 3,
        "io_tiles": 64, "host_instances": 4, "async_dataloader": True, "dataloader_workers": 8,
        "partials": "half", "recompute": "auto",
    },
}  # fmt: skip
# ResNet-50 inference on one Mk2 as Graphcore benchmarks it: synthetic data made on the IPU.
SYNTHETIC_INFERENCE: dict[str, Any] = {
    "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000,
              "dataset": {"name": "synthetic"}},
    "workload": {"mode": "infer", "micro_batch_size": 16},
    "system": {"ipu": "mk2", "num_ipus": 1, "hosts": 1},
    "plan": {"precision": "16.16", "device_iterations": 100, "partials": "half"},
}  # fmt: skip
PLANS = {"default-study": DEFAULT_STUDY, "pipelined-bert": PIPELINED_BERT, "multi-host": MULTI_HOST,
         "synthetic-inference": SYNTHETIC_INFERENCE}


def make_config(raw: dict[str, Any]) -> EvalConfig:
    return load_config(copy.deepcopy(raw))


def host_instances(cfg: EvalConfig) -> int:
    return int(cfg.plan.host_instances)


def stages(cfg: EvalConfig) -> int:
    return len(cfg.plan.pipeline.splits) + 1


def simulated_head(cfg: EvalConfig) -> tuple[str, int] | None:
    """(module path in the exported model, IPU) of a tied head the simulation charged to an
    earlier stage than the last (its `StageTime.also`), read from the simulated result."""
    from ipu_tune.exports._model_source import module_path

    stages = ipu_tune.evaluate(cfg).stages
    return next(((module_path(cfg, t.also[0]), t.stage) for t in stages[:-1] if t.also), None)


def stage_amps(cfg: EvalConfig) -> list[float]:
    """Each IPU's available memory proportion, as the plan states it (not through the
    `ExecutionPlan` property the exports use)."""
    per_ipu = list(cfg.plan.available_memory_proportion_per_ipu)
    return per_ipu or [cfg.plan.available_memory_proportion] * stages(cfg)


def outside_amp(cfg: EvalConfig) -> float:
    """The proportion a program sets for every conv and matmul: each IPU's when they are
    equal, else the plan's one proportion, for ops outside the stages."""
    amps = stage_amps(cfg)
    return amps[0] if len(set(amps)) == 1 else cfg.plan.available_memory_proportion


def _torchvision_model(name: str) -> Any:
    def build(**kwargs: Any) -> nn.Module:
        size = kwargs.pop("image_size", 224)
        num_classes = kwargs.pop("num_classes", 1000)
        cfg = ModelConfig(name=name, input_shape=[3, size, size], num_classes=num_classes,
                          kwargs=kwargs)  # fmt: skip
        return build_model(cfg)[0]

    return build


class _HuggingFaceBert(nn.Module):
    """transformers' BertForMaskedLM layout: the encoder under `bert`, the head as `cls`."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        keys = {"num_hidden_layers": "num_layers", "hidden_size": "hidden",
                "num_attention_heads": "num_heads", "intermediate_size": "intermediate",
                "vocab_size": "vocab_size", "max_position_embeddings": "max_position_embeddings",
                "type_vocab_size": "type_vocab_size"}  # fmt: skip
        kwargs = {keys[k]: v for k, v in config.items() if k in keys}
        inner = build_model(ModelConfig(name="bert_base", sequence_length=128, kwargs=kwargs))[0]
        self.bert = nn.Module()
        self.bert.embeddings = inner.embeddings
        self.bert.encoder = inner.encoder
        self.cls = inner.cls


def install_frameworks(monkeypatch: pytest.MonkeyPatch, popdist_env: bool) -> Log:
    """Recorders for every framework an export imports; models built for real (meta device)."""
    # torch imports its compiler lazily, the first time a meta-device init runs, and then
    # looks up `tensorflow`'s spec, which the recorder below lacks: import it first, so that
    # building a model does not depend on which test ran before.
    import torch._dynamo  # noqa: F401
    log = Log()
    install(monkeypatch, log, "poptorch", "popart", "popdist.poptorch", "popdist.popart",
            "popdist.tensorflow", "tensorflow.python.ipu.distributed.popdist_strategy",
            "torchvision.models", "transformers")  # fmt: skip
    log.returns["popdist.isPopdistEnvSet"] = lambda: popdist_env
    log.returns["poptorch.BeginBlock"] = lambda module, **_: module
    log.aliases["popdist.poptorch.Options"] = "poptorch.Options"
    built = log.built

    def keep(module: nn.Module) -> nn.Module:
        built.append(module)
        return module

    for name in ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
                 "resnext50_32x4d", "resnext101_32x8d", "vit_b_16"):  # fmt: skip
        builder = _torchvision_model(name)
        log.returns[f"torchvision.models.{name}"] = lambda _b=builder, **kw: keep(_b(**kw))
    log.returns["transformers.BertConfig"] = lambda **kw: kw
    log.returns["transformers.BertForMaskedLM"] = lambda config: keep(_HuggingFaceBert(config))
    log.built = built
    return log
