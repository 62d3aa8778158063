"""Batch norm folded into the convolution before it, in every export of an inference plan.

The simulator runs inference with each batch norm that follows a convolution of the same block
folded into it (ipu_tune/simulator/_inference.py, `inference_graph`; Jacob et al. 2018, section
3.2): the norm runs no compute set. A program running the unfolded model would run a graph the
simulation did not time, so:

* PopTorch folds the model in place before the blocks are placed, with torch's
  `torch.nn.utils.fusion.fuse_conv_bn_eval` (eval mode: frozen statistics) on each Conv2d and
  the BatchNorm2d registered right after it in the same parent (torchvision's and Transformers'
  conv-norm pairs; the module names the blocks address are kept, unlike a torch.fx rewrite,
  whose GraphModule does not call the blocks' forward hooks).
* PopART builds from the user's ONNX: the program says to export it from the folded model.
* TensorFlow: neither IPUConfig nor the IPU Keras API names a fold (framework-apis.md 3): the
  program says how to fold the user's Keras layers, and what not folding costs.
"""

from __future__ import annotations

from ._context import ExportContext

__all__ = ["FOLD_FUNCTION", "folds_batch_norm", "popart_fold_lines", "poptorch_fold_lines",
           "tf_fold_lines"]

FOLD_FUNCTION = "fold_batch_norms"


def folds_batch_norm(ctx: ExportContext) -> bool:
    """An inference plan whose simulation folded a norm into a convolution (the rule of
    `inference_graph`: a norm right after a conv of the same block); without a profile, an
    image model's inference."""
    if ctx.plan.training:
        return False
    if ctx.profile is None:
        return ctx.input_kind == "image"
    ops = ctx.profile.ops
    return any(op.kind == "norm" and ops[i - 1].kind == "conv" and ops[i - 1].block == op.block
               for i, op in enumerate(ops) if i > 0)


def _note(what: str) -> str:
    return ("# Inference: simulated with each batch norm folded into the convolution before it"
            f" (its frozen statistics scale the weights and shift the bias){what}")


def poptorch_fold_lines(ctx: ExportContext) -> list[str]:
    """The fold of the model, in place, before its blocks are placed."""
    if not folds_batch_norm(ctx):
        return []
    return [
        "",
        "",
        f"def {FOLD_FUNCTION}(module: torch.nn.Module) -> torch.nn.Module:",
        '    """Fold each BatchNorm2d into the Conv2d registered just before it (eval mode)."""',
        "    from torch.nn.utils.fusion import fuse_conv_bn_eval",
        "",
        "    for parent in list(module.modules()):",
        "        children = list(parent.named_children())",
        "        for (conv_name, conv), (bn_name, bn) in zip(children, children[1:]):",
        "            if isinstance(conv, torch.nn.Conv2d) and isinstance("
        "bn, torch.nn.BatchNorm2d):",
        "                setattr(parent, conv_name, fuse_conv_bn_eval(conv, bn))",
        "                setattr(parent, bn_name, torch.nn.Identity())",
        "    return module",
        "",
        "",
        _note(": the same graph here."),
        f"model = {FOLD_FUNCTION}(model.eval())",
    ]


def popart_fold_lines(ctx: ExportContext) -> list[str]:
    if not folds_batch_norm(ctx):
        return []
    return [_note(". Export your ONNX from the folded model: torch.nn.utils.fusion."
                  "fuse_conv_bn_eval on each conv-norm pair of model.eval() (as"
                  f" poptorch_options.py's {FOLD_FUNCTION} does), then torch.onnx.export.")]


def tf_fold_lines(ctx: ExportContext) -> list[str]:
    if not folds_batch_norm(ctx):
        return []
    return [_note(". Neither IPUConfig nor the IPU Keras API has a switch for it: fold your"
                  " Keras model's BatchNormalization layers into the Conv2D before each (kernel"
                  " times gamma / sqrt(moving_variance + epsilon), bias beta - moving_mean times"
                  " that scale) and drop them; left in, each norm runs a compute set the"
                  " simulation did not time.")]
