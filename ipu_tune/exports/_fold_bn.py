"""Batch norm folded into the convolution before it, in every export of an inference plan.

The simulator runs inference with some batch norms folded into the convolution before them
(ipu_tune/simulator/_inference.py, `inference_graph`; Jacob et al. 2018, section 3.2): those
norms run no compute set. Which ones is one rule, `ipu_tune.models.conv_norm_folds` (an exact
BatchNorm1d/2d/3d run right after the exact convolution of its rank, in the same block, that
alone reads the convolution's output). A program running another graph would run one the
simulation did not time, so every export names the same pairs, by module name from the profile:

* PopTorch lists them (`FOLD`) and folds each in place before the blocks are placed, with
  torch's `torch.nn.utils.fusion.fuse_conv_bn_eval` (eval mode: frozen statistics); the module
  names the blocks address are kept, unlike a torch.fx rewrite, whose GraphModule does not call
  the blocks' forward hooks. Pairing by registration order would fold a pre-norm block's norm
  into the convolution it feeds, and a BatchNorm2d subclass's activation would be dropped.
* PopART builds from the user's ONNX: the program says to export it from the model folded the
  same way.
* TensorFlow: neither IPUConfig nor the IPU Keras API names a fold (framework-apis.md 3): the
  program says which layers to fold, and what not folding costs.
"""

from __future__ import annotations

from ipu_tune.models import conv_norm_folds

from ._context import ExportContext

__all__ = ["FOLD_FUNCTION", "fold_pairs", "folds_batch_norm", "popart_fold_lines",
           "poptorch_fold_lines", "tf_fold_lines"]

FOLD_FUNCTION = "fold_batch_norms"
_RULE = ("each batch norm (exactly BatchNorm1d/2d/3d) run right after the convolution of its"
         " rank, in the same block, whose output only it reads")


def fold_pairs(ctx: ExportContext) -> tuple[tuple[str, str], ...]:
    """(convolution, norm) module names the simulation of this plan folded: none in training,
    and none without a profile (no simulation to match)."""
    if ctx.plan.training or ctx.profile is None:
        return ()
    ops = ctx.profile.ops
    return tuple((ops[c].name, ops[n].name) for c, n in conv_norm_folds(ctx.profile))


def folds_batch_norm(ctx: ExportContext) -> bool:
    """An inference plan whose simulation folded a norm into a convolution."""
    return bool(fold_pairs(ctx))


def _note(ctx: ExportContext, what: str) -> str:
    return (f"# Inference: simulated with {_RULE} folded into that convolution (its frozen"
            f" statistics scale the weights and shift the bias): {len(fold_pairs(ctx))}"
            f" pairs{what}")


def poptorch_fold_lines(ctx: ExportContext) -> list[str]:
    """The pairs, and their fold in place before the model's blocks are placed."""
    pairs = fold_pairs(ctx)
    if not pairs:
        return []
    return [
        "",
        "",
        _note(ctx, ", listed here; folding them runs the graph the simulation timed."),
        "FOLD = [",
        *(f"    ({conv!r}, {bn!r})," for conv, bn in pairs),
        "]",
        "",
        "",
        f"def {FOLD_FUNCTION}(module: torch.nn.Module) -> torch.nn.Module:",
        '    """Fold each FOLD norm into its convolution (eval mode); each becomes Identity."""',
        "    from torch.nn.utils.fusion import fuse_conv_bn_eval",
        "",
        "    def put(name: str, new: torch.nn.Module) -> None:",
        '        parent, _, leaf = name.rpartition(".")',
        "        setattr(module.get_submodule(parent), leaf, new)",
        "",
        "    for conv_name, bn_name in FOLD:",
        "        conv, bn = module.get_submodule(conv_name), module.get_submodule(bn_name)",
        "        put(conv_name, fuse_conv_bn_eval(conv, bn))",
        "        put(bn_name, torch.nn.Identity())",
        "    return module",
        "",
        "",
        f"model = {FOLD_FUNCTION}(model.eval())",
    ]


def popart_fold_lines(ctx: ExportContext) -> list[str]:
    if not folds_batch_norm(ctx):
        return []
    return [_note(ctx, " (poptorch_options.py lists them as FOLD). Export your ONNX from the"
                  " folded model: torch.nn.utils.fusion.fuse_conv_bn_eval on each of those"
                  f" pairs of model.eval() (as poptorch_options.py's {FOLD_FUNCTION} does),"
                  " then torch.onnx.export.")]


def tf_fold_lines(ctx: ExportContext) -> list[str]:
    if not folds_batch_norm(ctx):
        return []
    return [_note(ctx, " (poptorch_options.py lists them as FOLD). Neither IPUConfig nor the"
                  " IPU Keras API has a switch for it: fold each such BatchNormalization layer"
                  " of your Keras model into its Conv2D (kernel times gamma /"
                  " sqrt(moving_variance + epsilon), bias beta - moving_mean times that scale)"
                  " and drop it; left in, each norm runs a compute set the simulation did not"
                  " time.")]
