"""Build a model on the meta device and trace it into a `ModelProfile` (imports torch).

A model that fails on the meta device for want of values runs its step on the CPU instead
(`_cpu_step`). Kept apart from `_profiler` so that a profile served from the cache never
imports torch: a tuner start-up that finds its profile on disk is about 2 s faster.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable

import torch

from ipu_tune.config import DATASET_INPUTS, GENERATED, SYNTHETIC, DatasetConfig, ModelConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.models._assemble import BlockSpec, assemble, default_blocks, resolve_blocks
from ipu_tune.models._cpu_step import (
    bounded_memory,
    cpu_example,
    cpu_step_refusal,
    fails_on_meta,
    seeded,
)
from ipu_tune.models._fold import fold_head
from ipu_tune.models._hf_blame import (
    blame_overrides,
    defaulted_task_error,
    failing_overrides,
    few_layers,
    plain_rule,
)
from ipu_tune.models._profile import DEFAULT_SEQUENCE_LENGTH, ModelProfile
from ipu_tune.models._trace import BATCH, Trace, trace_model
from ipu_tune.models._zoo import ZOO, _one_line, build_model, hf_source

__all__ = ["compute", "label", "model_name"]


def label(cfg: ModelConfig) -> str:
    if cfg._target_:
        return f"model._target_={cfg._target_!r}"
    if hf_source(cfg) is not None and cfg.name not in ZOO:
        hf = cfg.hf
        return f"model.hf.config_file={hf.config_file!r}" if hf.config_file else (
            f"model.hf.model_type={hf.model_type!r}")
    return f"model.name={cfg.name!r}"


def _block_specs(model: torch.nn.Module, cfg: ModelConfig) -> tuple[list[BlockSpec], bool]:
    declared = getattr(model, "pipeline_blocks", None)
    if declared is None:
        return default_blocks(model), False
    ok = isinstance(declared, list | tuple) and all(
        isinstance(s, str) or (isinstance(s, tuple) and len(s) == 2) for s in declared
    )
    if not ok:
        raise IpuTuneError(
            f"{label(cfg)}: pipeline_blocks must be a list of module names or "
            "(name, first module) pairs"
        )
    return list(declared), bool(getattr(model, "pipeline_blocks_strict", True))


def _hf_inputs(cfg: ModelConfig, device: str = "meta",
               ) -> tuple[torch.nn.Module, str, tuple[int, ...], torch.Tensor]:
    from ipu_tune.models._hf import build_hf

    source = hf_source(cfg)
    assert source is not None
    try:
        with torch.device(device):
            model, kind, shape = build_hf(source)
    except IpuTuneError:
        raise
    except Exception as exc:  # Transformers' own code, on a type or config it cannot build
        why = f"Transformers cannot build it on the {device} device ({_one_line(exc)})"
        keys = failing_overrides(source, lambda without: _build_fails(without, device))
        error = blame_overrides(source, keys, "builds", why, "a value its model builds with")
        if error is not None:
            raise error from None
        raise IpuTuneError(f"{label(cfg)}: {why}; give the sizes of a published model in "
                           "model.hf.config, or its config.json as model.hf.config_file") from None
    _check_input_shape(cfg, model, kind, shape)
    if any(t.device.type != device for t in itertools.chain(model.parameters(), model.buffers())):
        # A weight made by torch.Tensor(n, d), which ignores the device it is built under
        # (Deformable DETR's and Mask2Former's level embeddings): the model is on one device.
        model = model.to(device)
    dtype = torch.long if kind == "tokens" else torch.float32
    return model, kind, shape, torch.zeros(BATCH, *shape, dtype=dtype, device="meta")


def _build_fails(source: ModelConfig, device: str) -> bool:
    """Whether Transformers' or torch's code fails to build `source`'s model; a check of ours
    that refuses another value after the build is a build."""
    from ipu_tune.models._hf import build_hf

    try:
        with torch.device(device):
            build_hf(source)
    except IpuTuneError:
        return False
    except Exception:
        return True
    return False


def _run_fails(source: ModelConfig) -> bool:
    """Whether `source`'s model fails to build, or to run a training step on the meta device."""
    try:
        model, _, _, example = _hf_inputs(source)
        trace_model(model, example)
    except Exception:
        return True
    return False


def _hf_run_error(cfg: ModelConfig, model: torch.nn.Module, why: str) -> IpuTuneError | None:
    """The overrides a Transformers model's forward or backward fails on (`_hf_blame`), the
    other layers' count kept at one for the retries, and the rule they break if it is plain."""
    source = hf_source(cfg)
    config = getattr(getattr(model, "hf_model", None), "config", None)
    if source is None or config is None:
        return None
    rule = plain_rule(config)
    keys = failing_overrides(source, _run_fails, few_layers(config))
    them = "it" if len(keys) == 1 else "them"
    why = f"{why}; {rule}" if rule else why
    return blame_overrides(source, keys, "runs", f"the model's forward or backward fails with "
                           f"{them} ({why})", "a value its model runs with")


def _check_input_shape(cfg: ModelConfig, model: torch.nn.Module, kind: str,
                       shape: tuple[int, ...]) -> None:
    """A Transformers model reads the input its config sizes (`image_size`, the audio's frames)
    or `model.sequence_length` tokens or samples; `model.input_shape` given (any value but the
    one the model reads, the seed setting's too) would be ignored, so it is refused, naming
    what sets that input."""
    if cfg.input_shape is None or list(cfg.input_shape) == list(shape):
        return
    config = getattr(getattr(model, "hf_model", None), "config", None)
    sized_by = _sized_by(config, kind, shape)
    verb = "set" if " and " in sized_by else "sets"
    raise bad_value("model.input_shape", list(cfg.input_shape), f"not read by a Transformers "
                    f"model, whose {_INPUT_NAMES.get(kind, kind)} {sized_by} {verb} "
                    f"({list(shape)} here); allowed: unset")


def _sized_by(config: object, kind: str, shape: tuple[int, ...]) -> str:
    """The keys that set a Transformers model's input (`_hf._pixel_shape`, `_hf_audio`)."""
    if kind == "tokens" or (kind == "audio" and len(shape) == 1):  # ids, a waveform's samples
        return "model.sequence_length"
    where = "model.hf.config."
    if kind == "image":
        if getattr(config, "image_size", None) is None and getattr(
                getattr(config, "vision_config", None), "image_size", None) is not None:
            where += "vision_config."
        frames = ", num_frames" if len(shape) == 4 else ""
        return f"{where}image_size (num_channels{frames})"
    # Speech2Text's features per frame, Whisper's mel bins and frames, AST's spectrogram.
    for keys in (("input_feat_per_channel", "input_channels"),
                 ("num_mel_bins", "max_source_positions"), ("max_length", "num_mel_bins")):
        if all(getattr(config, k, None) is not None for k in keys):
            return f"{where}{keys[0]} and {where}{keys[1]}"
    return "its config"


def _check_dataset(cfg: ModelConfig, input_kind: str) -> None:
    """A dataset of another input than the model reads (`DATASET_INPUTS`: `imagenet` for a
    text model) would be simulated as the model's input without a word. The schema's default
    (a config built without a preset, a factory of your own) counts as unset."""
    held = DATASET_INPUTS.get(cfg.dataset.name)
    if cfg.dataset.name == DatasetConfig().name or held in (None, input_kind):
        return
    fits = [n for n, kind in DATASET_INPUTS.items() if kind == input_kind]
    raise bad_value("model.dataset.name", cfg.dataset.name, f"holds {held} input, and "
                    f"{label(cfg)} reads {input_kind} input; allowed: {', '.join(fits)}"
                    f"{', ' if fits else ''}tokens, {SYNTHETIC} or {GENERATED}")


def _hf_compute(cfg: ModelConfig) -> ModelProfile:

    try:
        return _hf_profile(cfg)
    except IpuTuneError as exc:
        source = hf_source(cfg)
        raise (defaulted_task_error(source, exc) if source is not None else exc) from None


def _hf_profile(cfg: ModelConfig) -> ModelProfile:
    from ipu_tune.models._hf_meta import transformers_on_meta

    with transformers_on_meta():  # configured, built and traced quietly, no value read
        model, input_kind, shape, example = _hf_inputs(cfg)
        # Token ids and the attention mask as int32; uint8 pixels; audio as stored, fp32; and
        # the ids paired with either (a decoder's, a caption's) as int32.
        paired = 4 * int(getattr(model, "paired_tokens", 0))
        default_bytes = (4 * shape[0] * 2 if input_kind == "tokens" else math.prod(shape) + paired
                         if input_kind == "image" else 4 * math.prod(shape) + paired)
        return _profile(cfg, model, input_kind, shape, example, default_bytes,
                        lambda: _hf_inputs(cfg, "cpu")[0])


def _factory_on_cpu(cfg: ModelConfig) -> torch.nn.Module:
    with torch.device("cpu"):
        model = build_model(cfg)[0]
    return model.to("cpu")


def compute(cfg: ModelConfig) -> ModelProfile:
    if hf_source(cfg) is not None:
        return _hf_compute(cfg)
    with torch.device("meta"):
        model, input_kind = build_model(cfg)
    if any(p.device.type != "meta" for p in model.parameters()):
        model = model.to("meta")  # a factory that pinned its device; profile it all the same
    if input_kind == "tokens":
        seq = cfg.sequence_length or DEFAULT_SEQUENCE_LENGTH
        input_shape: tuple[int, ...] = (seq,)
        example = torch.zeros(BATCH, seq, dtype=torch.long, device="meta")
        # Token ids, attention mask and token types as int32 (the host-side BERT input set).
        default_bytes = 4 * seq * 3
    else:
        input_shape = tuple(int(d) for d in cfg.image_shape())
        example = torch.empty(BATCH, *input_shape, device="meta")
        default_bytes = math.prod(input_shape)  # one uint8 per stored pixel value
    return _profile(cfg, model, input_kind, input_shape, example, default_bytes,
                    lambda: _factory_on_cpu(cfg))


def _input_hint(cfg: ModelConfig, model: torch.nn.Module, input_kind: str) -> str:
    """For a factory that failed on its input: the other input kind when the model suggests it
    (token ids go to an embedding; floats given as ids reach none). For a Transformers base
    model on one of its inputs: the others it takes."""
    runner_hint = getattr(model, "input_hint", None)
    if callable(runner_hint):
        return str(runner_hint())
    if not cfg._target_:
        return ""
    embeds = any(isinstance(m, torch.nn.Embedding | torch.nn.EmbeddingBag)
                 for m in model.modules())
    if input_kind == "image" and embeds:
        return ("; it holds an embedding, so it may read token ids: give "
                "model.sequence_length=TOKENS instead of model.input_shape")
    if input_kind == "tokens" and not embeds:
        return ("; it holds no embedding, so it may read floats: give model.input_shape=[...] "
                "and leave model.sequence_length unset")
    return ""


_INPUT_NAMES = {"tokens": "token ids", "image": "images", "audio": "audio"}


def _trace(cfg: ModelConfig, model: torch.nn.Module, input_kind: str, example: torch.Tensor,
           on_cpu: Callable[[], torch.nn.Module]) -> tuple[Trace, torch.nn.Module, str]:
    """The trace of one training step on the meta device; for a model that fails there for
    want of values, on the CPU (`_cpu_step`). Returns the model traced too, and why the meta
    device did not run it (empty: it did)."""
    try:
        return trace_model(model, example), model, ""
    except IpuTuneError:
        raise
    except Exception as exc:
        failure = exc
    if not fails_on_meta(failure):  # the model's own, on any device
        alone = getattr(model, "tower_input", None)  # a base model's one input: it wants another
        given = f"{alone} alone" if alone else (
            f"{_INPUT_NAMES.get(input_kind, input_kind)} of shape {tuple(example.shape)}")
        blamed = _hf_run_error(cfg, model, _one_line(failure))
        if blamed is not None:
            raise blamed from None
        raise IpuTuneError(f"{label(cfg)}: cannot run forward and backward on {given} "
                           f"({_one_line(failure)}){_input_hint(cfg, model, input_kind)}") from None
    # PyTorch's first sentence names the operator; the rest is advice on torch.compile.
    reason = _one_line(failure).split(". ", 1)[0]
    where = f"{label(cfg)}: cannot run forward and backward on the meta device ({reason})"
    refusal = cpu_step_refusal(model)
    if refusal is not None:
        raise IpuTuneError(f"{where}; {refusal}") from None
    with seeded(), bounded_memory():
        cpu_model = on_cpu()
        try:
            cpu_input = cpu_example(cpu_model, input_kind, example)
            return trace_model(cpu_model, cpu_input), cpu_model, reason
        except IpuTuneError:
            raise
        except Exception as exc:
            raise IpuTuneError(f"{where}, nor on the CPU ({_one_line(exc)})") from None


def _profile(cfg: ModelConfig, model: torch.nn.Module, input_kind: str,
             input_shape: tuple[int, ...], example: torch.Tensor, default_bytes: int,
             on_cpu: Callable[[], torch.nn.Module]) -> ModelProfile:
    """The profile of `model`, traced on `example` (or on the CPU: `_trace`)."""
    _check_packing(cfg.dataset.sequences_per_pack, input_kind, input_shape)  # before tracing
    _check_dataset(cfg, input_kind)
    trace, model, meta_failure = _trace(cfg, model, input_kind, example, on_cpu)
    check_unused = getattr(model, "check_unused", None)
    if callable(check_unused):  # a Transformers base model on one of its inputs
        check_unused(trace.unused_parameters)
    specs, strict = _block_specs(model, cfg)
    blocks = resolve_blocks(specs, trace, strict=strict)
    ds = cfg.dataset
    # The two dataset names no pipeline makes are the profile's input sources of those names.
    source = ds.name if ds.name in (SYNTHETIC, GENERATED) else "dataset"
    profile = assemble(
        trace,
        blocks,
        name=model_name(cfg),
        input_shape=input_shape,
        input_kind=input_kind,
        sample_bytes=ds.sample_bytes if ds.sample_bytes is not None else default_bytes,
        # Synthetic and generated samples are made, not loaded: no data pipeline on the host.
        preprocess_s_per_sample=0.0 if source != "dataset" else ds.preprocess_s_per_sample,
        torch_version=str(torch.__version__),  # a plain str: unpickling needs no torch
        input_source=source,
        sequences_per_pack=float(ds.sequences_per_pack),
        paired_tokens=int(getattr(model, "paired_tokens", 0)),
    )
    profile = dataclasses.replace(profile, meta_failure=meta_failure[:300])
    head = getattr(model, "head_on_first_stage", None)
    if not isinstance(head, str):
        return profile
    into = getattr(model, "head_block", None)  # Whisper's: decoder layer 0's block
    return fold_head(profile, head, profile.blocks.index(into) if into in profile.blocks else 0)


def _check_packing(per_pack: float, input_kind: str, input_shape: tuple[int, ...]) -> None:
    """Packing puts whole sequences into one input of the sequence length: a token model's only,
    and at most one sequence per token."""
    key = "model.dataset.sequences_per_pack"
    if per_pack != 1.0 and input_kind != "tokens":
        raise bad_value(key, per_pack, "packs hold token sequences: 1.0 for a model of "
                        f"{'images' if input_kind == 'image' else 'audio'}")
    if input_kind == "tokens" and per_pack > input_shape[0]:
        raise bad_value(key, per_pack,
                        f"at most the sequence length ({input_shape[0]}): one sequence per token")


def model_name(cfg: ModelConfig) -> str:
    """What the profile is called: the zoo name, the factory, or the Transformers config."""
    if cfg._target_:
        return cfg._target_
    if cfg.name in ZOO or hf_source(cfg) is None:
        return cfg.name or "model"
    hf = cfg.hf
    if hf.config_file:
        return f"hf:{hf.config_file}"
    return f"hf:{hf.model_type}"
