"""Names of the Transformers path that need neither torch nor transformers: the tasks, the
zoo's published Hub models, a `model.hf` section's model type, task and overrides, and which
configs take the path (`hf_source`). Exports and labels read these without importing torch."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._config_json import config_json_label, config_json_values

__all__ = [
    "AUDIO_TASKS",
    "DEFAULT_TASKS",
    "HUB_MODELS",
    "IMAGE_TOKEN_KEYS",
    "TASKS",
    "HubModel",
    "base_model_class",
    "config_source",
    "heads_of",
    "hf_identity",
    "hf_overrides",
    "hf_source",
    "hf_task",
    "model_label",
    "splices_images",
    "unregistered_tower",
    "usual_task",
]  # fmt: skip

# Task -> the `transformers` auto class that builds its model from a config.
TASKS: Mapping[str, str] = {
    "masked-lm": "AutoModelForMaskedLM",
    "causal-lm": "AutoModelForCausalLM",
    "sequence-classification": "AutoModelForSequenceClassification",
    # One label per token (named entities, parts of speech): `model.num_classes` of them.
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "image-classification": "AutoModelForImageClassification",
    "seq2seq-lm": "AutoModelForSeq2SeqLM",
    # No head: the base model's features (a tower such as CLIP's vision model, or DINOv2),
    # trained under a stand-in loss on its output; a model of one input only (ids or pixels).
    "feature-extraction": "AutoModel",
    # Audio heads (ipu_tune/models/_hf_audio.py): speech recognition by CTC (wav2vec2, HuBERT),
    # audio classification, and speech recognition by an encoder-decoder (Whisper).
    "ctc": "AutoModelForCTC",
    "audio-classification": "AutoModelForAudioClassification",
    "speech-seq2seq": "AutoModelForSpeechSeq2Seq",
    # A vision-language model that puts its image features into the text at the places of an
    # image token (LLaVA, PaliGemma, InternVL): pixels and token ids in, next-token logits out
    # (ipu_tune/models/_hf_vision_text.py).
    "image-text-to-text": "AutoModelForImageTextToText",
}
# The heads of models that read audio (their input kind is "audio").
AUDIO_TASKS = ("ctc", "audio-classification", "speech-seq2seq")
# The head a model type is usually pre-trained with, when `model.hf.task` is not given.
DEFAULT_TASKS: Mapping[str, str] = {
    "bert": "masked-lm", "roberta": "masked-lm", "distilbert": "masked-lm",
    "deberta": "masked-lm", "gpt2": "causal-lm", "llama": "causal-lm", "mistral": "causal-lm",
    "qwen2": "causal-lm", "gpt_neox": "causal-lm", "opt": "causal-lm",
    "vit": "image-classification",
    "t5": "seq2seq-lm", "mt5": "seq2seq-lm", "bart": "seq2seq-lm",
}  # fmt: skip
# For a model type DEFAULT_TASKS does not name, its usual head is looked up in Transformers'
# own auto-class mappings, in this order: an encoder-decoder's generation head first (BART and
# T5 also have causal-LM heads), then the pre-training heads, then vision, then fine-tuning.
_TASK_MAPPINGS = (
    ("seq2seq-lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("masked-lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("causal-lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),  # `splices_images`
    ("image-classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("sequence-classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("question-answering", "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"),
)
# Model types that read audio, and their usual head in this order: an encoder-decoder's speech
# recognition (Whisper, Speech2Text), else CTC (wav2vec2, HuBERT), else audio classification
# (AST). Looked up before `_TASK_MAPPINGS`: Whisper's decoder alone is also a causal LM.
_AUDIO_MAPPINGS = (
    ("speech-seq2seq", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
    ("ctc", "MODEL_FOR_CTC_MAPPING_NAMES"),
    ("audio-classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
)


def _audio_task(model_type: str) -> str | None:
    """The usual head of a model type that reads audio (`_AUDIO_MAPPINGS`), else None."""
    if model_type in DEFAULT_TASKS:  # text and vision types: no Transformers import
        return None
    from transformers.models.auto import modeling_auto

    return next((task for task, name in _AUDIO_MAPPINGS
                 if model_type in getattr(modeling_auto, name, {})), None)  # fmt: skip


def usual_task(model_type: str) -> str | None:
    """The head `model_type` is usually run with: DEFAULT_TASKS, else an audio model's
    (`_AUDIO_MAPPINGS`), else the first task of `_TASK_MAPPINGS` Transformers has a class for,
    else its base model's features if it has one (None for types with no model class). Imports
    Transformers only for a type DEFAULT_TASKS does not name."""
    if model_type in DEFAULT_TASKS:
        return DEFAULT_TASKS[model_type]
    audio = _audio_task(model_type)
    if audio is not None:
        return audio
    from transformers.models.auto import modeling_auto

    task = next((task for task, name in _TASK_MAPPINGS
                 if model_type in getattr(modeling_auto, name, {}) and (
                     task != "image-text-to-text" or _splices_by_default(model_type))),
                None)  # fmt: skip
    if task is None and (model_type in modeling_auto.MODEL_MAPPING_NAMES
                         or base_model_class(model_type) is not None):
        return "feature-extraction"
    return task


def built_mappings() -> frozenset[str]:
    """The names of Transformers' auto mappings of the heads ipu-tune builds (`heads_of`)."""
    return frozenset(name for _, name in _TASK_MAPPINGS + _AUDIO_MAPPINGS) | {
        "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"}


def heads_of(model_type: str) -> list[str]:
    """The tasks of `TASKS` Transformers has a class of `model_type` for (its auto classes'
    mappings), in `TASKS` order."""
    from transformers.models.auto import modeling_auto

    names = dict(_TASK_MAPPINGS + _AUDIO_MAPPINGS)
    names["token-classification"] = "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"
    return [task for task in TASKS
            if model_type in getattr(modeling_auto, names.get(task, ""), {})]


# The config fields that name the token at whose places a vision-language model puts its image
# features (Transformers' LLaVA, PaliGemma, InternVL configs; older ones say `_index`).
IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index")


def splices_images(config: Any) -> bool:
    """Whether `config` is a vision-language model's that puts its image features into the
    text at the places of an image token: its token ids hold those places, so a caption of
    plain tokens is not its input (CLIP's is)."""
    return any(getattr(config, key, None) is not None for key in IMAGE_TOKEN_KEYS)


@functools.cache  # a config class built once per type: labels and exports ask again
def _splices_by_default(model_type: str) -> bool:
    """`splices_images` of the model type's config class defaults (an image-captioning model
    such as BLIP's has no image token: it is no image-text-to-text model here)."""
    import transformers

    try:
        return splices_images(transformers.AutoConfig.for_model(model_type))
    except Exception:  # a config class that does not build takes no such head
        return False


def unregistered_tower(model_type: str) -> str | None:
    """The base model class of a tower Transformers' `AutoModel` does not build
    (`base_model_class`), else None (AutoModel builds the type, or there is none)."""
    from transformers.models.auto import modeling_auto

    if model_type in modeling_auto.MODEL_MAPPING_NAMES:
        return None
    return base_model_class(model_type)


def base_model_class(model_type: str) -> str | None:
    """The base model class of a type Transformers' auto classes do not register (a tower of
    a composite model: `siglip_text_model`, `blip_vision_model`): the one public class named
    `...Model` (no head: not `...For...`, not `...LMHeadModel`) built from the type's config
    class. None if there is not exactly one."""
    import importlib

    import transformers
    from transformers import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        return None
    config_class = CONFIG_MAPPING[model_type]
    module_name = config_class.__module__.replace(".configuration_", ".modeling_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # a module that needs a package not installed (timm, Pillow)
        return None
    names = [name for name, value in vars(module).items()
             if name.endswith("Model") and "For" not in name and "LMHead" not in name
             and not name.endswith("PreTrainedModel") and isinstance(value, type)
             and getattr(value, "config_class", None) is config_class
             and getattr(transformers, name, None) is value]  # fmt: skip
    return names[0] if len(names) == 1 else None


@dataclass(frozen=True)
class HubModel:
    """A zoo name built through the Transformers path: a published model's sizes and task."""

    model_type: str
    hub_id: str  # the Hub model whose config.json has these sizes
    task: str
    sizes: Mapping[str, int]  # config fields; the rest are the config class's defaults
    text: str


# Published sizes: GPT-2 (Radford et al. 2019, table 2; the Hub's gpt2 ... gpt2-xl config.json)
# and BERT (Devlin et al. 2019, section 3; bert-base-uncased, bert-large-uncased). The BERT
# entries carry the SQuAD head (`BertForQuestionAnswering`: a 2-way span classifier on every
# token), as Graphcore fine-tunes BERT and runs its inference (graphcore/examples nlp/bert
# SQuAD configs; optimum-graphcore's `PipelinedBertForQuestionAnswering`, head on the last IPU).
_BERT_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
               "intermediate_size": 4096}  # fmt: skip
HUB_MODELS: Mapping[str, HubModel] = {
    "gpt2": HubModel("gpt2", "gpt2", "causal-lm", {"n_embd": 768, "n_layer": 12, "n_head": 12},
                     "GPT-2 small, 124 M (Radford et al. 2019), Hugging Face GPT2LMHeadModel"),
    "gpt2_medium": HubModel("gpt2", "gpt2-medium", "causal-lm",
                            {"n_embd": 1024, "n_layer": 24, "n_head": 16},
                            "GPT-2 medium, 355 M, Hugging Face GPT2LMHeadModel"),
    "gpt2_large": HubModel("gpt2", "gpt2-large", "causal-lm",
                           {"n_embd": 1280, "n_layer": 36, "n_head": 20},
                           "GPT-2 large, 774 M, Hugging Face GPT2LMHeadModel"),
    "gpt2_xl": HubModel("gpt2", "gpt2-xl", "causal-lm",
                        {"n_embd": 1600, "n_layer": 48, "n_head": 25},
                        "GPT-2 XL, 1.56 B, Hugging Face GPT2LMHeadModel"),
    "bert_base_squad": HubModel("bert", "bert-base-uncased", "question-answering",
                                {"hidden_size": 768, "num_hidden_layers": 12,
                                 "num_attention_heads": 12, "intermediate_size": 3072},
                                "BERT-Base + SQuAD span head, Hugging Face "
                                "BertForQuestionAnswering"),
    "bert_large_squad": HubModel("bert", "bert-large-uncased", "question-answering",
                                 _BERT_LARGE, "BERT-Large + SQuAD span head, Hugging Face "
                                 "BertForQuestionAnswering"),
}  # fmt: skip


def hf_overrides(cfg: ModelConfig) -> dict[str, Any]:
    """`model.hf.config` as a plain dict (None: no overrides)."""
    given = cfg.hf.config
    if given is None:
        return {}
    if not isinstance(given, Mapping) or not all(isinstance(k, str) for k in given):
        raise bad_value("model.hf.config", given, "a mapping of config fields, e.g. {n_layer: 24}")
    return json.loads(json.dumps(dict(given), default=str))


def config_source(cfg: ModelConfig, in_file: bool) -> tuple[str, Any]:
    """The key (and its value) of the settings a config or model was built from that an error
    belongs to: the config file (`in_file`), else the command line's overrides, the config
    file, or the model type's defaults."""
    hf = cfg.hf
    if in_file and hf.config_file:
        return "model.hf.config_file", config_json_label(hf.config_file)
    overrides = hf_overrides(cfg)
    if overrides:
        return "model.hf.config", overrides
    if hf.config_file:
        return "model.hf.config_file", config_json_label(hf.config_file)
    return "model.hf.model_type", hf.model_type


def hf_identity(cfg: ModelConfig) -> tuple[str, str]:
    """(model type, task) of `cfg.hf`, without building anything (exports name them)."""
    hf = cfg.hf
    model_type, architectures = hf.model_type or "", None
    if hf.config_file:
        data = config_json_values(hf.config_file)
        model_type, architectures = str(data["model_type"]), data.get("architectures")
    if isinstance(hf.config, Mapping) and "architectures" in hf.config:  # as `build_hf` reads
        architectures = hf.config["architectures"]
    return model_type, hf_task(cfg, model_type, architectures)


# The class-name endings of `config.json`'s "architectures" (the class the model was saved
# from: BertForQuestionAnswering, GPT2LMHeadModel, ...) and the task each builds.
_ARCHITECTURE_TASKS = (
    ("ForQuestionAnswering", "question-answering"),
    ("ForSequenceClassification", "sequence-classification"),
    ("ForTokenClassification", "token-classification"),
    ("ForImageClassification", "image-classification"),
    ("ForMaskedLM", "masked-lm"),
    ("ForPreTraining", "masked-lm"),
    ("ForCausalLM", "causal-lm"),
    ("LMHeadModel", "causal-lm"),
    ("ForConditionalGeneration", "seq2seq-lm"),
    ("Model", "feature-extraction"),  # a base model saved as one (BertModel, CLIPVisionModel)
)
# The same for a model type that reads audio (its main input is a waveform or features): its
# ForSequenceClassification classifies audio, its ForConditionalGeneration transcribes speech
# (a text model's is seq2seq-lm). Others (Wav2Vec2ForPreTraining) are refused: name the task.
_AUDIO_ARCHITECTURE_TASKS = (
    ("ForCTC", "ctc"),
    ("ForAudioClassification", "audio-classification"),
    ("ForSequenceClassification", "audio-classification"),
    ("ForConditionalGeneration", "speech-seq2seq"),
    ("ForSpeechToText", "speech-seq2seq"),
    ("Model", "feature-extraction"),
)


def hf_task(cfg: ModelConfig, model_type: str, architectures: Any = None) -> str:
    """`model.hf.task`; else the task of the class a config file was saved from (its
    "architectures"); else the model type's usual head (`usual_task`)."""
    task = cfg.hf.task
    if isinstance(architectures, str):  # one class named without a list's brackets
        architectures = [architectures] if architectures.strip() else None
    if task is None and isinstance(architectures, list) and architectures:
        name = str(architectures[0])
        ends = _AUDIO_ARCHITECTURE_TASKS if _audio_task(model_type) else _ARCHITECTURE_TASKS
        task = next((t for end, t in ends if name.endswith(end)), None)
        if task is None:  # another head than the file's would be profiled, unseen
            raise _unbuilt_head(cfg, model_type, name)
    if task == "seq2seq-lm" and usual_task(model_type) == "image-text-to-text":
        task = "image-text-to-text"  # a vision-language model's ForConditionalGeneration
    task = task or usual_task(model_type)
    if task is None:
        raise bad_value("model.hf.task", None, f"one of {', '.join(TASKS)}: {model_type} has no "
                        "usual head among them (no model class in Transformers' auto classes); "
                        "name the head to build")  # fmt: skip
    if task not in TASKS:
        raise bad_value("model.hf.task", task, f"one of {', '.join(TASKS)}", TASKS)
    return task


def _unbuilt_head(cfg: ModelConfig, model_type: str, name: str) -> IpuTuneError:
    """A config's "architectures" naming a head ipu-tune does not build, named by where it
    was given: `model.hf.config.architectures`, else the config file's field."""
    usual = usual_task(model_type)
    hint = f" ({model_type}'s usual head is {usual})" if usual else ""
    allowed = (f"a head ipu-tune does not build; name one of {', '.join(TASKS)} as "
               f"model.hf.task{hint}")
    given = cfg.hf.config if isinstance(cfg.hf.config, Mapping) else {}
    if "architectures" in given:
        return bad_value("model.hf.config.architectures", given["architectures"],
                         f"{name} is {allowed}")
    return bad_value("model.hf.config_file", cfg.hf.config_file,
                     f"the config.json was saved from {name} (its \"architectures\"), {allowed}")


def hf_source(cfg: ModelConfig) -> ModelConfig | None:
    """The config to build through Transformers (`model.hf`), or None for other models. A
    zoo name of `HUB_MODELS` becomes its model type with its published sizes (overridable)."""
    if cfg._target_:
        return None
    hf = cfg.hf
    if cfg.name is not None and cfg.name in HUB_MODELS:
        hub = HUB_MODELS[cfg.name]
        config = {**hub.sizes, **hf_overrides(cfg)}
        return replace(cfg, hf=HfConfig(model_type=hub.model_type, config=config,
                                        task=hf.task or hub.task))  # fmt: skip
    if hf.model_type or hf.config_file or cfg.name == "hf":
        return cfg
    return None


def model_label(cfg: ModelConfig) -> str:
    """The model as study names, listings and export headers show it: its factory's function,
    its zoo name, or a Transformers model's type (`vit`, `t5`; read from a config file), so
    that two Transformers models are told apart by more than a hash."""
    if cfg._target_:
        return cfg._target_.rsplit(".", 1)[-1]
    if cfg.name and cfg.name != "hf":
        return cfg.name
    if hf_source(cfg) is None:
        return "model"
    return hf_identity(cfg)[0] or "hf"
