"""`ipu_config.json` for optimum-graphcore, and the `run_with_optimum.py` that loads it.

optimum-graphcore 0.7.1 runs a Transformers model from an `IPUConfig`
(`optimum/graphcore/ipu_configuration.py`, `IPUConfig.__init__`): the field names and types in
`IPU_CONFIG_FIELDS` are that signature's, and the tests read them back from that source file.
How a plan maps onto them:

* `layers_per_ipu`: layers per pipeline stage. Layers are the model's repeated blocks (names
  ending in an index, `transformer.h.7`); the first block (the embeddings, with a tied head) is
  no layer and sits on IPU0, as `parallelize()` places it. `ipus_per_replica`: the stages.
* `matmul_proportion`: the plan's available memory proportion, one value per IPU
  (`IPUConfig._to_options` turns it into `setAvailableMemoryProportion({"IPU<i>": ...})`).
* `embedding_serialization_factor`: `plan.embedding_serialization`.
* `enable_half_partials`: partials half; `optimizer_state_offchip`,
  `replicated_tensor_sharding`: as the plan's knobs; `recompute_checkpoint_every_layer`:
  recompute `every_block` (optimum runs `PipelinedExecution`, whose pipeline recomputation
  PopTorch turns on by itself: the plan's `auto` and `checkpoints`).
* Training plans fill `replication_factor`, `gradient_accumulation_steps`, `device_iterations`;
  inference plans the `inference_*` fields (optimum compiles inference with
  `ShardedExecution` and these).
* The other fields of a file the study started from (`plan.ipu_config_carried`: seed,
  serialisation, output mode, the other mode's fields, ...) are written as the file gave them.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

from ipu_tune.config import EvalConfig
from ipu_tune.errors import bad_value
from ipu_tune.knobs import moot_keys
from ipu_tune.models import AUDIO_TASKS, HUB_MODELS, TASKS, ModelProfile
from ipu_tune.plan import ExecutionPlan

from ._model_source import _kwargs, masked_count, relative_config_note
from ._optimum_infer import eight_bit_training_note, inference_lines
from ._source import docstring, program

__all__ = ["IPU_CONFIG_FIELDS", "OPTIMUM_VERSION", "optimum_layers", "render_ipu_config",
           "render_run_with_optimum"]  # fmt: skip

OPTIMUM_VERSION = "0.7.1"
# IPUConfig.__init__'s parameters and their annotations (optimum-graphcore 0.7.1), verbatim.
IPU_CONFIG_FIELDS: Mapping[str, str] = {
    "replication_factor": "int",
    "inference_replication_factor": "int",
    "gradient_accumulation_steps": "int",
    "layers_per_ipu": "List[int]",
    "inference_layers_per_ipu": "Optional[List[int]]",
    "ipus_per_replica": "Optional[int]",
    "inference_ipus_per_replica": "Optional[int]",
    "optimizer_state_offchip": "bool",
    "replicated_tensor_sharding": "bool",
    "matmul_proportion": "Union[float, List[float]]",
    "inference_matmul_proportion": "Optional[Union[float, List[float]]]",
    "enable_half_partials": "bool",
    "embedding_serialization_factor": "Optional[int]",
    "inference_embedding_serialization_factor": "Optional[int]",
    "serialized_embedding_splits_per_ipu": "Optional[List[int]]",
    "inference_serialized_embedding_splits_per_ipu": "Optional[List[int]]",
    "projection_serialization_factor": "Optional[int]",
    "inference_projection_serialization_factor": "Optional[int]",
    "serialized_projection_splits_per_ipu": "Optional[List[int]]",
    "inference_serialized_projection_splits_per_ipu": "Optional[List[int]]",
    "recompute_checkpoint_every_layer": "bool",
    "device_iterations": "int",
    "inference_device_iterations": "int",
    "output_mode": "str",
    "seed": "Optional[int]",
    "auto_loss_scaling": "bool",
    "executable_cache_dir": "str",
    "explicit_ir_inference": "bool",
    "parallelize_kwargs": "Optional[Dict[str, Any]]",
    "inference_parallelize_kwargs": "Optional[Dict[str, Any]]",
}
_LAYER = re.compile(r"[._]\d+$")  # `transformer.h.7`; torchvision ViT `encoder_layer_7`


def optimum_layers(profile: ModelProfile) -> list[int]:
    """Per block, the entries of optimum-graphcore's `layers_per_ipu` it holds: a repeated
    block (`transformer.h.7`) is one; the first block (the embeddings, which `parallelize()`
    places on IPU0) and a container of other blocks (a ConvNeXt stage, whose `layers` are
    blocks of their own: optimum counts only those) are none, but for the layers of its list
    that run inside it (the first stage's first layer). A wav2vec2-family CTC model's front
    end and head are entries too (`_ctc_entries`)."""
    names = profile.blocks
    counts = []
    for i, name in enumerate(names):
        first_child = next((n for n in names[i + 1:] if n.startswith(name + ".")), None)
        if first_child is not None:  # layers 0..K-1 of its list run inside it
            found = _LAYER.search(first_child)
            counts.append(int(found.group()[1:]) if found else 0)
        else:
            counts.append(int(i > 0 and bool(_LAYER.search(name))))
    front, head = _ctc_entries(profile)
    counts[0] += front
    counts[-1] += head
    return counts


# A wav2vec2-family CTC model's front end as `PipelinedWav2Vec2ForCTC.parallelize()` (and
# HuBERT's) counts it: each conv layer of the feature encoder and the positional conv embedding
# are entries of `layers_per_ipu`, as is the CTC head (`lm_head`) after the encoder layers.
_CONV_LAYER = re.compile(r"\.feature_extractor\.conv_layers\.(\d+)\.")


def _ctc_entries(profile: ModelProfile) -> tuple[int, int]:
    """(entries before the first encoder layer, entries after the last) that optimum-graphcore's
    wav2vec2-family CTC model adds to its layers (0, 0 for other models)."""
    convs = {m.group(1) for o in profile.ops if (m := _CONV_LAYER.search(o.name))}
    if not convs or not any(o.name.endswith("lm_head") for o in profile.ops):
        return 0, 0
    return len(convs) + any(".pos_conv_embed." in o.name for o in profile.ops), 1


def _layers_per_ipu(plan: ExecutionPlan, profile: ModelProfile) -> list[int]:
    counts = optimum_layers(profile)
    starts = [0, *(profile.block_index(s) for s in plan.splits), len(counts)]
    return [sum(counts[lo:hi]) for lo, hi in itertools.pairwise(starts)]


# The fields a plan sets, per IPU of a replica or per run, with the `inference_` prefix for an
# inference plan; the others of a file read in (`plan.from_ipu_config`) are carried unchanged.
_PER_MODE = ("layers_per_ipu", "ipus_per_replica", "matmul_proportion", "replication_factor",
             "device_iterations")
# `embedding_serialization_factor` is the one field of both modes: the models read it whatever
# the mode (`self.ipu_config.embedding_serialization_factor`: modeling_bert.py, modeling_gpt2.py,
# modeling_t5.py, ...; only mt5 reads `inference_embedding_serialization_factor`, which is
# carried). A plan sets it only where it runs the knob (`serializes`).
_SERIALIZATION = "embedding_serialization_factor"
_BOTH_MODES = ("enable_half_partials", "recompute_checkpoint_every_layer")
_TRAINING = ("gradient_accumulation_steps", "optimizer_state_offchip",
             "replicated_tensor_sharding")
# Fields holding one value per IPU of a replica: carried only to a plan of as many IPUs.
PER_IPU_FIELDS = frozenset(f"{p}serialized_{what}_splits_per_ipu" for p in ("", "inference_")
                           for what in ("embedding", "projection"))  # fmt: skip


def plan_fields(training: bool, vocabulary: bool) -> frozenset[str]:
    """The IPUConfig fields a plan of that mode sets (`ipu_config_values`) for a model with
    a vocabulary head (`serializes`) or without."""
    prefix = "" if training else "inference_"
    return frozenset((*(prefix + f for f in _PER_MODE), *_BOTH_MODES,
                      *(_TRAINING if training else ()), *((_SERIALIZATION,) if vocabulary else ())))


def serializes(profile: ModelProfile) -> bool:
    """Whether a plan of the model runs `plan.embedding_serialization`: its needs read the
    model's facts alone (a token model's vocabulary head), so an empty plan judges it."""
    return "plan.embedding_serialization" not in moot_keys({}, profile.facts)


def ipu_config_values(plan: ExecutionPlan, profile: ModelProfile) -> dict[str, Any]:
    """The IPUConfig fields of `plan` (training or `inference_*` fields by its mode)."""
    layers = _layers_per_ipu(plan, profile)
    amp = [round(float(a), 4) for a in plan.stage_memory_proportions]
    prefix = "" if plan.training else "inference_"
    values: dict[str, Any] = {
        f"{prefix}layers_per_ipu": layers,
        f"{prefix}ipus_per_replica": plan.stages,
        f"{prefix}matmul_proportion": amp,
        f"{prefix}replication_factor": plan.replication_factor,
        f"{prefix}device_iterations": plan.device_iterations,
        "enable_half_partials": plan.partials == "half",
        "recompute_checkpoint_every_layer": plan.recompute == "every_block",
    }
    vocabulary = serializes(profile)
    if vocabulary:
        values[_SERIALIZATION] = plan.embedding_serialization
    if plan.training:
        values["gradient_accumulation_steps"] = plan.gradient_accumulation
        values["optimizer_state_offchip"] = plan.offload_optimizer_state
        values["replicated_tensor_sharding"] = plan.replicated_tensor_sharding
    assert values.keys() == plan_fields(plan.training, vocabulary)  # what a plan sets
    return values


def carried_fields(plan: ExecutionPlan, cfg: EvalConfig) -> tuple[dict[str, Any], list[str]]:
    """The fields of the file read in (`plan.ipu_config_carried`) that go into the export as
    they were, and those left out: a per-IPU list of another IPU count than the plan's."""
    carried = dict(cfg.plan.ipu_config_carried or {})
    misfit = sorted(k for k in PER_IPU_FIELDS & carried.keys()
                    if isinstance(carried[k], list) and len(carried[k]) != plan.stages)
    return {k: v for k, v in carried.items() if k not in misfit}, misfit


def render_ipu_config(plan: ExecutionPlan, profile: ModelProfile, cfg: EvalConfig) -> str:
    """The `ipu_config.json` text of `plan` (`IPUConfig.from_pretrained(folder)` reads it):
    the plan's fields over those of the file the study started from (`carried_fields`)."""
    carried, _ = carried_fields(plan, cfg)
    # Outputs returned to the host when training: the last step's, unless the file says
    # (ipu-tune does not simulate the outputs' traffic). optimum reads the field for training
    # only and returns every output for inference (`IPUConfig.to_options`, 0.7.1 L599): an
    # inference plan leaves it as the file gave it, for the training it may also run.
    mode = {"output_mode": "final"} if plan.training else {}
    values = _one_serialization({**mode, **carried, **ipu_config_values(plan, profile)})
    return json.dumps(values, indent=2) + "\n"


def _one_serialization(values: dict[str, Any]) -> dict[str, Any]:
    """IPUConfig takes a serialization factor or splits over IPUs, not both (`validate_ipu_
    config`, 0.7.1 L538): the plan's factor above 1 replaces the file's splits; at 1 (no
    slicing on one IPU), the file's splits stay and the factor is left unset."""
    for prefix in ("", "inference_"):
        factor = f"{prefix}embedding_serialization_factor"
        splits = f"{prefix}serialized_embedding_splits_per_ipu"
        if values.get(splits) and factor in values:
            values.pop(splits if values[factor] > 1 else factor)
    return values


# optimum-graphcore's pipeline task of each profiled task (optimum/graphcore/pipelines).
_PIPELINE_TASKS = {
    "masked-lm": "fill-mask",
    "causal-lm": "text-generation",
    "sequence-classification": "text-classification",
    "token-classification": "token-classification",
    "question-answering": "question-answering",
    "image-classification": "image-classification",
    "seq2seq-lm": "text2text-generation",
    # optimum/graphcore/pipelines/__init__.py SUPPORTED_TASKS: CTC and speech-seq2seq models
    # both transcribe through "automatic-speech-recognition".
    "ctc": "automatic-speech-recognition",
    "speech-seq2seq": "automatic-speech-recognition",
    "audio-classification": "audio-classification",
}
# Characters of a CTC stand-in transcript per second of audio (read speech runs at about 15),
# well under the encoder's 50 frames per second that CTC needs at least one of per character.
_CTC_CHARACTERS_PER_SECOND = 16
_AUDIO_RATE = 16_000  # samples per second of a waveform model's input


def _source(cfg: EvalConfig) -> tuple[str, str, str, dict[str, Any]]:
    """(model type or "", config file or Hub id or "", task, config overrides)."""
    from ipu_tune.models import hf_identity, hf_overrides

    m = cfg.model
    overrides = hf_overrides(m)
    if m.name in HUB_MODELS:
        hub = HUB_MODELS[str(m.name)]
        return hub.model_type, hub.hub_id, m.hf.task or hub.task, {**hub.sizes, **overrides}
    model_type, task = hf_identity(m)
    return model_type, m.hf.config_file or "", task, overrides


def _call_args(values: Mapping[str, Any]) -> str:
    """Call arguments as every program writes them (`**{...}` when a key is no Python name:
    a config key never becomes code)."""
    return _kwargs(dict(values))


def _model_line(cfg: EvalConfig, task: str, profile: ModelProfile) -> list[str]:
    from ipu_tune.models import hf_settings, hf_source

    model_type, where, _, overrides = _source(cfg)
    source = hf_source(cfg.model)
    # As the profile built it: the overrides, then what ipu-tune sets (labels, padding token).
    overrides = {**overrides, **(hf_settings(source) if source is not None else {})}
    auto = TASKS[task]
    if cfg.model.name in HUB_MODELS:
        config = f"AutoConfig.from_pretrained({where!r}, {_call_args(overrides)})"
    elif where:  # as given: a folder, or the file (whatever its name), which Transformers reads
        config = f"AutoConfig.from_pretrained({where!r}{', ' if overrides else ''}" \
                 f"{_call_args(overrides)})"
    else:
        config = f"AutoConfig.for_model({model_type!r}{', ' if overrides else ''}" \
                 f"{_call_args(overrides)})"
    out = [f"config = {config}  # the configuration ipu-tune profiled"]
    if cfg.model.name not in HUB_MODELS:
        out[:0] = relative_config_note(where)
    positions = masked_count(cfg, profile)
    if positions is not None:  # optimum gathers the masked tokens before the MLM head
        out.append(f"config.max_num_masked_tokens = {positions}  # model.kwargs.masked_positions")
    return [*out,
            f"model = {auto}.from_config(config)  # or .from_pretrained(...) for trained weights"]


_TEXT_LABELS = {"sequence-classification": "0", "token-classification": "torch.zeros_like(ids)"}


def _data_lines(task: str, profile: ModelProfile, plan: ExecutionPlan) -> list[str]:
    """Random samples standing in for the user's dataset: at least one combined batch (micro-
    batch x GA x replicas x device iterations), which each IPUTrainer step consumes whole."""
    if task == "image-classification":
        pixels = ", ".join(str(d) for d in profile.input_shape)  # a video's frames first
        sample = f"{{'pixel_values': torch.randn({pixels}), 'labels': 0}}"
    elif task in AUDIO_TASKS:
        sample = _audio_sample(task, profile)
    else:
        ids = f"torch.randint(config.vocab_size, ({profile.input_shape[0]},))"
        if task == "question-answering":  # the answer span's first and last token
            labels = "'start_positions': 0, 'end_positions': 0"
        else:  # a class per sequence or per token, else the tokens themselves
            labels = "'labels': " + _TEXT_LABELS.get(task, "ids")
        sample = f"{{'input_ids': (ids := {ids}), {labels}}}"
    return [
        "class Data(torch.utils.data.Dataset):  # your dataset",
        f"    def __len__(self): return {plan.samples_per_call}  # one combined batch",
        f"    def __getitem__(self, i): return {sample}",
    ]


def _audio_sample(task: str, profile: ModelProfile) -> str:
    """One stand-in sample of an audio model: its main input (a waveform's samples or
    features, as profiled) and its labels: a class, a CTC transcript of character ids (no
    blank, id 0), or a speech-seq2seq model's decoder tokens."""
    shape = ", ".join(str(d) for d in profile.input_shape)
    audio = f"model.main_input_name: torch.randn({shape})"
    if task == "audio-classification":
        return f"{{{audio}, 'labels': 0}}"
    if task == "ctc":
        chars = max(1, profile.input_elements * _CTC_CHARACTERS_PER_SECOND // _AUDIO_RATE)
        return f"{{{audio}, 'labels': torch.randint(1, config.vocab_size, ({chars},))}}"
    tokens = profile.paired_tokens
    return f"{{{audio}, 'labels': torch.randint(config.vocab_size, ({tokens},))}}"


def _generation_note(task: str, profile: ModelProfile) -> list[str]:
    """What the simulated rate of a generating head is: one forward pass over the sequence
    (scoring, or a prompt's prefill), not the token-by-token decoding the pipeline runs."""
    if task == "speech-seq2seq":
        return [f"# Simulated: one forward pass of the encoder and of {profile.paired_tokens} "
                "decoder tokens per sample. Transcribing runs the decoder once per new token,",
                "# at a rate ipu-tune did not simulate."]
    if task not in ("causal-lm", "seq2seq-lm"):
        return []
    return [f"# Simulated: one forward pass over {profile.input_shape[0]} tokens per sample "
            "(scoring, or a prompt's prefill). Generating runs a pass per new token,",
            "# at a rate ipu-tune did not simulate."]


def render_run_with_optimum(plan: ExecutionPlan, profile: ModelProfile, cfg: EvalConfig,
                            *notes: str) -> str:
    """A dozen-line program running `plan` with optimum-graphcore from `ipu_config.json`;
    `notes`: paragraphs its docstring adds (which plan this is, when not the study's best)."""
    _, _, task, _ = _source(cfg)
    if task not in _PIPELINE_TASKS:
        raise bad_value("model.hf.task", task, "a head optimum-graphcore runs: "
                        + ", ".join(_PIPELINE_TASKS))
    _, misfit = carried_fields(plan, cfg)
    if misfit:  # optimum refuses a per-IPU list of another length than the IPUs of a replica
        notes = (*notes, f"Left out of ipu_config.json: {', '.join(misfit)} of the file read in"
                 f" (plan.from_ipu_config), one value per IPU of another IPU count than this"
                 f" plan's {plan.stages}.")
    names = "IPUTrainer, IPUTrainingArguments" if plan.training else "IPUConfig"
    # 8-bit I/O of pixels the host streams (`knobs.moot_keys`: not with synthetic data).
    eight_bit = (plan.eight_bit_io and task == "image-classification"
                 and "plan.eight_bit_io" not in moot_keys(cfg, profile.input_kind))
    title = (f"Run the plan ipu-tune chose with optimum-graphcore {OPTIMUM_VERSION} (Poplar SDK"
             " 3.x): ipu_config.json beside this file.")
    doc = docstring(title, *notes) if notes else [f'"""{title}"""']
    head = [
        *doc,
        "import os",
        "",
        "import torch",
        *([] if plan.training else ["import poptorch"]),
        f"from optimum.graphcore import {'IPUConfig, ' if plan.training else ''}{names}",
        *([] if plan.training else ["from optimum.graphcore.modeling_utils import to_pipelined"]),
        f"from transformers import AutoConfig, {TASKS[task]}",
        "",
        "# ipu_config.json beside this file, wherever it is run from",
        "ipu_config = IPUConfig.from_pretrained(os.path.dirname(os.path.abspath(__file__)))",
        *_model_line(cfg, task, profile),
    ]
    fp32 = not plan.model_fp16
    if plan.training:
        args = {"output_dir": "out", "per_device_train_batch_size": plan.micro_batch_size,
                "fp32": fp32, "max_steps": 10,
                "dataloader_mode": "async" if plan.async_dataloader else "sync",
                "dataloader_num_workers": plan.dataloader_workers}  # fmt: skip
        body = [
            *eight_bit_training_note(eight_bit),
            *_data_lines(task, profile, plan),
            f"args = IPUTrainingArguments({_call_args(args)})",
            "IPUTrainer(model=model, ipu_config=ipu_config, args=args, "
            "train_dataset=Data()).train()",
        ]
    else:
        body = [
            *_generation_note(task, profile),
            *inference_lines(plan, profile, task, eight_bit),
        ]
    return program([*head, *body], fold=False)
