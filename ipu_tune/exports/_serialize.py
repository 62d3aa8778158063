"""The vocabulary matmul in serial slices (`plan.embedding_serialization`), in each program.

The simulator runs each vocabulary matmul (`ModelProfile.vocabulary_ops`: a language model's
output head, tied to the word embedding or of its shape) in that many slices of its output
channels, each holding a share of its weight and partials (`ipu_tune.simulator._compute`).
PopTorch does it with `poptorch.serializedMatMul` (OutputChannels), as optimum-graphcore's
`SerializedLinear` does; PopART with `Builder.setSerializeMatMul` on the matmul's output;
optimum-graphcore reads `embedding_serialization_factor` (`_ipu_config`). TensorFlow's IPU API
names no such option: its program says what to do by hand.
"""

from __future__ import annotations

from ._context import ExportContext
from ._docs import cite
from ._model_source import literal, module_path

__all__ = ["popart_serialize_lines", "poptorch_serialize_lines", "tf_serialize_lines"]

_KEY = "plan.embedding_serialization"


def _heads(ctx: ExportContext) -> list[str]:
    """The vocabulary matmuls the plan slices, as the exported model names its modules; empty:
    no slicing (a factor of 1, or no such matmul)."""
    if ctx.profile is None or ctx.plan.embedding_serialization == 1 or not ctx.runs(_KEY):
        return []
    return [module_path(ctx.config, ctx.profile.ops[i].name)
            for i in ctx.profile.vocabulary_ops]


def _reason(ctx: ExportContext, heads: list[str], how: str) -> str:
    factor = ctx.plan.embedding_serialization
    return (f"# Embedding serialization {factor}: the vocabulary matmul {', '.join(heads)} in"
            f" {factor} serial slices of its output channels ({how}), each holding 1/{factor} of"
            " its weight and partials: the temporaries the simulation counted.")


def poptorch_serialize_lines(ctx: ExportContext) -> list[str]:
    """Each vocabulary Linear replaced by one whose matmul is `poptorch.serializedMatMul`, its
    weight (shared with the embeddings when tied) kept; the output channels are padded to a
    multiple of the slices, as optimum-graphcore pads the vocabulary."""
    heads = _heads(ctx)
    if not heads:
        return []
    return [
        "",
        "",
        _reason(ctx, heads, f"{cite('serialize')}; optimum-graphcore's SerializedLinear"),
        f"SERIALIZED = {literal(heads)}",
        f"SERIALIZATION_FACTOR = {ctx.plan.embedding_serialization}",
        "",
        "",
        "class SerializedLinear(torch.nn.Module):",
        '    """`linear` with its matmul in SERIALIZATION_FACTOR slices of its output channels."""',
        "",
        "    def __init__(self, linear: torch.nn.Linear) -> None:",
        "        super().__init__()",
        "        self.linear = linear",
        "",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:",
        "        n = self.linear.out_features",
        "        weight = torch.nn.functional.pad(self.linear.weight,"
        " (0, 0, 0, -n % SERIALIZATION_FACTOR))",
        "        out = poptorch.serializedMatMul(x, weight.t(),"
        " poptorch.MatMulSerializationMode.OutputChannels, SERIALIZATION_FACTOR)[..., :n]",
        "        return out if self.linear.bias is None else out + self.linear.bias",
        "",
        "",
        "for name in SERIALIZED:",
        '    parent, _, leaf = name.rpartition(".")',
        "    owner = model.get_submodule(parent)",
        "    setattr(owner, leaf, SerializedLinear(owner.get_submodule(leaf)))",
    ]


def popart_serialize_lines(ctx: ExportContext) -> list[str]:
    heads = _heads(ctx)
    if not heads:
        return []
    factor = ctx.plan.embedding_serialization
    return [
        _reason(ctx, heads, cite("popart_serialize"))
        + ' Call builder.setSerializeMatMul({output}, "output_channels", factor) on the output'
        " of each matmul named here as you build it.",
        f"SERIALIZE_MATMUL = {literal(dict.fromkeys(heads, factor))}",
    ]


def tf_serialize_lines(ctx: ExportContext) -> list[str]:
    heads = _heads(ctx)
    if not heads:
        return []
    factor = ctx.plan.embedding_serialization
    return [_reason(ctx, heads, "no option of the TensorFlow 2 IPU API") + " NOTE: build it"
            f" yourself: split the layer's kernel into {factor} column slices (tf.split),"
            " multiply by each in turn and concatenate the outputs."]
