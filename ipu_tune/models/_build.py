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
from ipu_tune.errors import IpuTuneError, bad_value, shown
from ipu_tune.models._assemble import BlockSpec, assemble, default_blocks, resolve_blocks
from ipu_tune.models._cpu_step import (
    bounded_memory,
    cpu_example,
    cpu_step_refusal,
    fails_on_meta,
    seeded,
)
from ipu_tune.models._fold import fold_head
from ipu_tune.models._hf_names import hf_overrides
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
        keys = _failing_overrides(source, device)
        given = hf_overrides(source)
        if len(keys) == 1:
            raise bad_value(f"model.hf.config.{keys[0]}", given[keys[0]],
                            f"{why}; allowed: a value its model builds with (it builds without "
                            "this one)") from None
        if keys:  # values that clash (a padding id past the vocabulary): each one's removal builds
            clash = ", ".join(f"{k}={shown(given[k])}" for k in keys)
            raise IpuTuneError(f"model.hf.config: {clash}: {why}; allowed: values that build "
                               "together (it builds without any one of them)") from None
        raise IpuTuneError(f"{label(cfg)}: {why}; give the sizes of a published model in "
                           "model.hf.config, or its config.json as model.hf.config_file") from None
    _check_input_shape(cfg, kind, shape)
    if any(t.device.type != device for t in itertools.chain(model.parameters(), model.buffers())):
        # A weight made by torch.Tensor(n, d), which ignores the device it is built under
        # (Deformable DETR's and Mask2Former's level embeddings): the model is on one device.
        model = model.to(device)
    dtype = torch.long if kind == "tokens" else torch.float32
    return model, kind, shape, torch.zeros(BATCH, *shape, dtype=dtype, device="meta")


# Most overrides `_failing_overrides` rebuilds without, one at a time (a build on the meta
# device takes up to seconds; the error path of a long list would take minutes).
_MAX_PINNED_OVERRIDES = 8


def _failing_overrides(source: ModelConfig, device: str) -> list[str]:
    """The `model.hf.config` keys without any one of which the model builds: what to name when
    Transformers' or torch's code refuses a value the config class never checked (`pad_token_id`
    past the vocabulary: torch's Embedding asserts); two or more when their values clash. Empty
    when no single key is to blame, or there are too many to try."""
    from ipu_tune.models._hf import build_hf

    given = hf_overrides(source)
    if not 0 < len(given) <= _MAX_PINNED_OVERRIDES:
        return []
    found = []
    for key in given:
        rest = {k: v for k, v in given.items() if k != key}
        without = dataclasses.replace(source, hf=dataclasses.replace(source.hf, config=rest))
        try:
            with torch.device(device):
                build_hf(without)
        except IpuTuneError:  # it builds; a check after the build refuses another value
            pass
        except Exception:  # it fails without this key too: not this key's fault alone
            continue
        found.append(key)
    return found


def _check_input_shape(cfg: ModelConfig, kind: str, shape: tuple[int, ...]) -> None:
    """A Transformers model reads the pixels or audio its config sizes (`image_size`, its
    position embeddings' grid) and a token model `model.sequence_length` ids; `model.input_shape`
    given otherwise would be ignored, so it is refused. Unset (the schema's default) it is not
    read."""
    given = list(cfg.input_shape)
    if given in (list(ModelConfig().input_shape), list(shape)):
        return
    if kind == "tokens":
        raise bad_value("model.input_shape", given, "unset: a Transformers model of token ids "
                        f"reads model.sequence_length of them ({shape[0]})")
    raise bad_value("model.input_shape", given, f"a Transformers model reads the {kind} its "
                    f"config sizes, {list(shape)} (model.hf.config: image_size, num_channels, "
                    f"num_frames, or the audio's model.sequence_length); allowed: unset or "
                    f"{list(shape)}")


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
        input_shape = tuple(int(d) for d in cfg.input_shape)
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
