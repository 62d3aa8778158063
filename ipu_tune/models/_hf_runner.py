"""How a Transformers model runs in the profiler: `HfRunner` wraps it under its own module
names, with the call of its family (token ids, with or without a mask of ones; pixels; encoder
and decoder ids; a base model's one input)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ipu_tune.errors import bad_value

__all__ = ["AS_FACTORY", "HfRunner", "causal_call", "features", "image_call", "image_text_call",
           "seq2seq_call", "text_call", "tower_call"]  # fmt: skip

# What a refusal of a model that reads another input advises.
AS_FACTORY = ("profile it as a factory of your own taking one tensor (model._target_, "
              "docs/models.md)")
# The main inputs Transformers models take (a base model is run on one of them).
_MAIN_INPUTS = ("input_ids", "pixel_values", "pixel_values_videos", "input_values",
                "input_features", "bbox", "visual_feats")


class HfRunner(nn.Module):
    """Runs a Transformers model on one example tensor, under the model's own module names.

    Its children are the model's children (the same objects), so the profiler's module paths
    and the pipeline blocks are the names a Transformers user addresses (`transformer.h.3`)."""

    hf_model: nn.Module
    # The blocks are found in the model, not declared by its author: the profiler orders them
    # as they run (SegFormer's per-stage lists interleave) and drops any that never runs.
    pipeline_blocks_strict = False
    # The block a tied head is charged to (None: the first); Whisper's runs with decoder layer 0.
    head_block: str | None = None
    # Token ids per sample beside the main input (0: none): a speech-seq2seq model's decoder
    # ids beside its audio, an image-text model's caption beside its pixels.
    paired_tokens = 0

    def __init__(self, model: nn.Module, call: Callable[[nn.Module, Tensor], Any],
                 blocks: list[Any], head: str | None, tower_input: str | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "hf_model", model)  # not a child: no "hf_model." prefix
        self._modules = model._modules
        # Weights the model holds itself, not in a child (Deformable DETR's level embeddings).
        self._parameters = model._parameters
        self._buffers = model._buffers
        self.call = call
        self.pipeline_blocks = blocks
        self.head_on_first_stage = head
        self.tower_input = tower_input  # a base model's one input (feature-extraction)

    def check_unused(self, unused: Mapping[str, int]) -> None:
        """A base model run on its one input must run each of its parts: a part whose every
        parameter stays idle (a vision-language model's vision tower and projector, given ids)
        is there for another input, and the profile would miss its work."""
        if self.tower_input is None:
            return
        idle: dict[str, int] = {}
        for module, count in unused.items():
            part = module.split(".", 1)[0]
            idle[part] = idle.get(part, 0) + count
        for part, child in self.hf_model.named_children():
            size = sum(p.numel() for p in child.parameters())
            if size and idle.get(part, 0) >= size:
                raise bad_value("model.hf.task", "feature-extraction",
                                f"a model of one input; on {self.tower_input} alone its {part} "
                                f"({size / 1e6:.1f} M parameters) does not run, so it reads "
                                f"other inputs: {AS_FACTORY}")  # fmt: skip

    def input_hint(self) -> str:
        """For a base model that failed on its one input: the other main inputs its forward
        takes, and what to do (empty for a model run on all it needs)."""
        if self.tower_input is None:
            return ""
        params = inspect.signature(self.hf_model.forward).parameters
        required = [n for n, p in params.items() if p.default is p.empty and p.kind in (
            p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        other = [n for n in dict.fromkeys([*required, *_MAIN_INPUTS])
                 if n in params and n != self.tower_input]
        takes = f" ({', '.join(other)})" if other else ""
        return f"; it reads another input{takes}: {AS_FACTORY}"

    def train(self, mode: bool = True) -> HfRunner:
        self.hf_model.train(mode)
        return super().train(mode)

    def forward(self, x: Tensor) -> Any:
        return self.call(self.hf_model, x)


def text_call(model: nn.Module, ids: Tensor) -> Any:
    # No attention mask: an encoder applies one as an elementwise add on the attention scores,
    # a small share of a layer's work.
    return model(input_ids=ids)


def causal_call(model: nn.Module, ids: Tensor) -> Any:
    # An attention mask of ones, as the host feeds one: without it Transformers inspects the
    # position ids for packed sequences, a data-dependent check the meta device cannot run.
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)


def seq2seq_call(model: nn.Module, ids: Tensor) -> Any:
    # Decoder inputs as long as the encoder's (the profile's one sequence length); no mask,
    # as for encoders (`text_call`).
    return model(input_ids=ids, decoder_input_ids=ids, use_cache=False)


def image_call(model: nn.Module, pixels: Tensor) -> Any:
    return features(model(pixel_values=pixels))


def features(out: Any) -> Any:
    """What a base model without a head outputs as its features, for the stand-in loss: its
    `last_hidden_state`, else the last of its `*_last_hidden_state` fields (Mask2Former's
    transformer decoder after its pixel decoder and encoder), not merely its first tensor
    (Deformable DETR's first is its initial reference points, which most of the model never
    reaches). A head's output (`logits`) and other outputs are returned as they are."""
    if not isinstance(out, Mapping) or isinstance(out.get("logits"), Tensor):
        return out
    states = [key for key, value in out.items()
              if key.endswith("last_hidden_state") and isinstance(value, Tensor)]
    if not states:
        return out
    return out["last_hidden_state"] if "last_hidden_state" in states else out[states[-1]]


def tower_call(model: nn.Module, ids: Tensor) -> Any:
    # A base model on token ids: a mask of ones, as `causal_call` (decoders inspect the
    # positions without one); no `use_cache`, which encoders do not take.
    return features(model(input_ids=ids, attention_mask=torch.ones_like(ids)))


def image_text_call(tokens: int, token_id: int) -> Callable[[nn.Module, Tensor], Any]:
    """The call of an image-text model on its pixels, each paired with a caption of `tokens`
    usual token ids (no padding: a mask of ones). Its output is the image-text similarity
    `logits_per_image` (micro-batch x micro-batch) stacked on its transpose (the captions
    against the images): cross-entropy over those 2 x micro-batch rows, each against its own
    pair, is CLIP's symmetric contrastive loss, the mean of its image and text sides (Radford
    et al. 2021, Figure 3)."""

    def call(model: nn.Module, pixels: Tensor) -> Any:
        ids = torch.full((pixels.shape[0], tokens), token_id, dtype=torch.long,
                         device=pixels.device)
        out = model(input_ids=ids, pixel_values=pixels, attention_mask=torch.ones_like(ids))
        logits = getattr(out, "logits_per_image", None)
        return torch.cat((logits, logits.t())) if isinstance(logits, Tensor) else features(out)

    return call
