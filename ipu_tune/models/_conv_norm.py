"""Which batch norms an inference graph folds into the convolution before them: one rule, read
by the simulator (`ipu_tune.simulator.inference_graph`, which drops the folded norms) and by
every export (`ipu_tune.exports._fold_bn`, which folds exactly these module pairs by name), so
that the program runs the graph the simulation timed.

A norm folds (Jacob et al. 2018, section 3.2: its frozen statistics scale the weights and shift
the bias) when all of these hold:
- the norm is exactly `torch.nn.BatchNorm1d/2d/3d` with running statistics, and the
  convolution exactly the `torch.nn.Conv1d/2d/3d` of the same rank. A subclass may do more in
  its forward (timm's `BatchNormAct2d` applies its activation inside, a weight-standardised
  conv renormalises its weights), and `fuse_conv_bn_eval` would drop that; a norm without
  running statistics normalises with its input's own (as a layer norm does).
- the norm runs right after the convolution, in the same block, and reads its output;
- nothing else reads the convolution's output (a skip connection reading it needs the
  unfolded value);
- each of the two modules runs once (a module called twice would fold for every call).
"""

from __future__ import annotations

from collections import Counter

from ipu_tune.models._profile import ModelProfile

__all__ = ["conv_norm_folds", "module_class"]

# Exact class -> the norm class of the same rank it folds with.
_PAIRS = {f"torch.nn.modules.conv.Conv{d}d": f"torch.nn.modules.batchnorm.BatchNorm{d}d"
          for d in (1, 2, 3)}


def module_class(module: object) -> str:
    """What the profile records of a leaf module's class (`OpProfile.module_class`): its
    qualified name, marked when a norm keeps no running statistics. No torch import: duck
    typed on the attribute `torch.nn.BatchNorm*` sets to None without them."""
    cls = type(module)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if getattr(module, "running_mean", 0) is None:
        name += " (batch statistics)"
    return name


def conv_norm_folds(profile: ModelProfile) -> tuple[tuple[int, int], ...]:
    """(convolution, norm) op indices of every pair that folds, in execution order."""
    ops = profile.ops
    runs = Counter(op.name for op in ops)
    return tuple(
        (i - 1, i) for i in range(1, len(ops))
        if (norm := ops[i]).module_class == _PAIRS.get((conv := ops[i - 1]).module_class)
        and conv.block == norm.block and conv.only_reader == norm.name
        and runs[conv.name] == runs[norm.name] == 1
    )
