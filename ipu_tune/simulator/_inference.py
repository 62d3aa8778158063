"""What an inference graph runs and keeps, read from a profile traced as a training forward.

An inference graph differs from the forward of a training graph in three ways the simulator
models (the rest of an op's cost is the same):
- batch norm folds into the convolution before it: with its statistics frozen, its scale
  multiplies the convolution's weights and its shift becomes the convolution's bias, so the
  norm runs no compute set of its own (Jacob et al. 2018, "Quantization and Training of Neural
  Networks for Efficient Integer-Arithmetic-Only Inference", section 3.2; PopRT and the ONNX
  converters apply it before compiling). The bias add is taken to ride on the elementwise op
  that follows (ReLU or the residual add, one map pass; estimate). Which norms fold is one rule,
  `ipu_tune.models.conv_norm_folds`, which every export folds by module name too: an exact
  batch norm right after the convolution of the same block whose output only it reads (a layer
  norm, in transformers, normalises with statistics of its own input).
- dropout is the identity and the loss is not computed: neither runs (PyTorch `eval()`
  semantics; an exported inference graph ends at the model's output).
- activations live as an inference graph keeps them: an op's input and output, plus the
  block's input held for a residual (elementwise ops run in place, as PopART's in-place pattern
  and torchvision's `inplace=True` ReLU and `out += identity` do; PopVision liveness: tensors
  never live at once share memory), never more than the traced forward's own liveness peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipu_tune.models import ModelProfile, conv_norm_folds

__all__ = ["InferenceGraph", "inference_graph"]

# Kinds that produce a new tensor in an inference graph; elementwise and data-movement ops
# (`other`: views, reshapes) write in place or alias their input.
_PRODUCERS = frozenset({"conv", "matmul", "embedding", "norm", "softmax", "pool"})


@dataclass(frozen=True)
class InferenceGraph:
    """Per op: whether the inference graph drops it; per block: its peak live elements per
    sample."""

    dropped: tuple[bool, ...]
    live_block: tuple[int, ...]


def _is_dropout(name: str) -> bool:
    # Module names of dropout layers in the zoo (Hugging Face BERT, torchvision ViT heads):
    # the last path component is `dropout` or `dropout_N`.
    return name.rsplit(".", 1)[-1].startswith("dropout")


def inference_graph(profile: ModelProfile) -> InferenceGraph:
    """The ops an inference graph of `profile` drops and its per-block liveness peaks."""
    ops = profile.ops
    folded_norms = {norm for _, norm in conv_norm_folds(profile)}
    dropped: list[bool] = []
    for i, op in enumerate(ops):
        folded = i in folded_norms
        identity = op.kind == "elementwise" and _is_dropout(op.name)
        dropped.append(folded or identity or op.kind == "loss")
    live_block: list[int] = []
    for b, stats in enumerate(profile.block_stats):
        block_in = (profile.input_elements if b == 0
                    else profile.block_stats[b - 1].output_elements)
        peak = block_in
        prev: int | None = None
        for j in range(stats.first_op, stats.last_op):
            op = ops[j]
            if dropped[j] or op.kind not in _PRODUCERS:
                continue
            if prev is None:  # reads the block's input
                live = block_in + op.output_elements
            else:  # reads the last tensor produced; the block's input is held for a residual
                live = block_in + prev + op.output_elements
            peak = max(peak, live)
            prev = op.output_elements
        live_block.append(min(peak, stats.max_live_elements))
    return InferenceGraph(tuple(dropped), tuple(live_block))
