"""Names of the Transformers path that need neither torch nor transformers: the tasks, the
GPT-2 sizes, a `model.hf` section's model type, task and overrides, and which configs take the
path (`hf_source`). Exports and labels read these without importing torch."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.errors import bad_value

__all__ = ["DEFAULT_TASKS", "GPT2_SIZES", "GPT2_ZOO", "TASKS", "hf_identity", "hf_overrides",
           "hf_source", "hf_task"]  # fmt: skip

# Task -> the `transformers` auto class that builds its model from a config.
TASKS: Mapping[str, str] = {
    "masked-lm": "AutoModelForMaskedLM",
    "causal-lm": "AutoModelForCausalLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    "image-classification": "AutoModelForImageClassification",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
}
# The head a model type is usually pre-trained with, when `model.hf.task` is not given.
DEFAULT_TASKS: Mapping[str, str] = {
    "bert": "masked-lm", "roberta": "masked-lm", "distilbert": "masked-lm",
    "deberta": "masked-lm", "gpt2": "causal-lm", "llama": "causal-lm", "mistral": "causal-lm",
    "qwen2": "causal-lm", "gpt_neox": "causal-lm", "opt": "causal-lm",
    "vit": "image-classification",
    "t5": "seq2seq-lm", "mt5": "seq2seq-lm", "bart": "seq2seq-lm",
}  # fmt: skip
# Published GPT-2 sizes (Radford et al. 2019, table 2; the Hub's gpt2, gpt2-medium, gpt2-large,
# gpt2-xl config.json): the rest of GPT2Config's defaults are those models' values.
GPT2_SIZES: Mapping[str, dict[str, int]] = {
    "gpt2": {"n_embd": 768, "n_layer": 12, "n_head": 12},
    "gpt2_medium": {"n_embd": 1024, "n_layer": 24, "n_head": 16},
    "gpt2_large": {"n_embd": 1280, "n_layer": 36, "n_head": 20},
    "gpt2_xl": {"n_embd": 1600, "n_layer": 48, "n_head": 25},
}
# GPT-2 sizes of the zoo, built through the Transformers path (`hf_source`).
GPT2_ZOO: Mapping[str, str] = {
    "gpt2": "GPT-2 small, 124 M (Radford et al. 2019), Hugging Face GPT2LMHeadModel",
    "gpt2_medium": "GPT-2 medium, 355 M, Hugging Face GPT2LMHeadModel",
    "gpt2_large": "GPT-2 large, 774 M, Hugging Face GPT2LMHeadModel",
    "gpt2_xl": "GPT-2 XL, 1.56 B, Hugging Face GPT2LMHeadModel",
}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]


def _read_config_file(path_text: str) -> dict[str, Any]:
    path = Path(path_text).expanduser()
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise bad_value("model.hf.config_file", path_text,
                        f"a readable config.json ({_one_line(exc)})") from None  # fmt: skip
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise bad_value("model.hf.config_file", path_text,
                        "a Transformers config.json with a \"model_type\" key")  # fmt: skip
    return data


def hf_overrides(cfg: ModelConfig) -> dict[str, Any]:
    """`model.hf.config` as a plain dict (None: no overrides)."""
    given = cfg.hf.config
    if given is None:
        return {}
    if not isinstance(given, Mapping) or not all(isinstance(k, str) for k in given):
        raise bad_value("model.hf.config", given, "a mapping of config fields, e.g. {n_layer: 24}")
    return json.loads(json.dumps(dict(given), default=str))


def hf_identity(cfg: ModelConfig) -> tuple[str, str]:
    """(model type, task) of `cfg.hf`, without building anything (exports name them)."""
    hf = cfg.hf
    model_type = hf.model_type or ""
    if hf.config_file:
        model_type = str(_read_config_file(hf.config_file)["model_type"])
    return model_type, hf_task(cfg, model_type)


def hf_task(cfg: ModelConfig, model_type: str) -> str:
    task = cfg.hf.task or DEFAULT_TASKS.get(model_type)
    if task is None:
        raise bad_value("model.hf.task", None, f"one of {', '.join(TASKS)} for {model_type}")
    if task not in TASKS:
        raise bad_value("model.hf.task", task, f"one of {', '.join(TASKS)}")
    return task


def hf_source(cfg: ModelConfig) -> ModelConfig | None:
    """The config to build through Transformers (`model.hf`), or None for other models. A
    GPT-2 zoo name becomes the model type gpt2 with its published sizes (overridable)."""
    if cfg._target_:
        return None
    hf = cfg.hf
    if cfg.name is not None and cfg.name in GPT2_ZOO:
        config = {**GPT2_SIZES[cfg.name], **hf_overrides(cfg)}
        return replace(cfg, hf=HfConfig(model_type="gpt2", config=config,
                                        task=hf.task or "causal-lm"))  # fmt: skip
    if hf.model_type or hf.config_file or cfg.name == "hf":
        return cfg
    return None
