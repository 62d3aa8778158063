"""What each pipeline stage holds: per-stage sums of the profile, cached per split list.

These depend only on the profile and the splits (not on micro-batch, precision or any other
knob), so a study computes them once per distinct split list.

A masked-LM head tied to the word embeddings (the zoo's BERT: its last block `cls`, Hugging Face
naming) runs on the first IPU, beside the embedding whose weight it shares, as Graphcore runs
BERT (graphcore/examples nlp/bert/popart configs and nlp/bert/pytorch/modeling.py: embedding and
MLM head on IPU0, the encoder layers from the next IPU). The last stage then sends the encoder
output back to IPU0 and receives its gradient. A Transformers model's tied head is already
charged to its first block by the profile (`ModelProfile.tied_head`); its stage is named, and
the last stage sends its output back to it as for BERT.
`head_placement` is where every export reads the stage that runs the head.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan, stage_starts
from ipu_tune.simulator._arrays import LOCK, ProfileArrays, lru_put, peak_block, profile_arrays

__all__ = ["TIED_HEAD_BLOCKS", "HeadPlacement", "StageShape", "head_placement",
           "head_stage_count", "stage_shapes",
           "tied_head"]


@dataclass(frozen=True)
class StageShape:
    """Per-sample element counts of one stage's blocks [lo, hi)."""

    stage: int
    lo: int
    hi: int
    first_block: str
    last_block: str
    params: float
    param_ops: float  # ops with parameters (weight-update compute sets)
    saved_el: float  # activations kept for backward, all blocks
    input_el: float  # what enters the stage (model input or the previous block's output)
    output_el: float  # what leaves it over the IPU-Links
    boundary_el: float  # outputs of its blocks but the last (block-boundary checkpoints)
    max_live_el: float  # largest transient of one block
    infer_live_el: float  # the same in the inference graph (`_inference`)
    # Recomputing block by block, at the liveness peak: checkpoints of the blocks before the
    # peak block, and that block's own saved + transient elements (`peak_block`).
    peak_checkpoint_el: float
    peak_block_el: float
    # Blocks [head_lo, head_hi) it also runs: the tied head on the first stage (else empty).
    head_lo: int = 0
    head_hi: int = 0
    head_block: str = ""  # its name
    head_saved_el: float = 0.0  # of saved_el, the tied head's [head_lo, head_hi)
    # What the tied head's own stage receives from the last stage (its output): under
    # recomputation the checkpoint of that stage's input, as of every pipeline stage.
    head_input_el: float = 0.0
    sends: bool = False  # sends its output over IPU-Links (not the last stage of a plain chain)


# The block names of a masked-LM head tied to the embeddings (BertForMaskedLM's `cls`).
TIED_HEAD_BLOCKS = ("cls",)


def tied_head(profile: ModelProfile) -> bool:
    """Whether the profile ends in a token model's tied masked-LM head (placed on IPU0)."""
    return profile.input_kind == "tokens" and profile.block_stats[-1].name in TIED_HEAD_BLOCKS


_CACHE: OrderedDict[tuple[int, tuple[str, ...]], tuple[ModelProfile, tuple[StageShape, ...]]] = (
    OrderedDict()
)
_CACHE_SIZE = 1024


def stage_shapes(profile: ModelProfile, plan: ExecutionPlan) -> tuple[StageShape, ...]:
    """The stages of `plan.splits`; raises `IpuTuneError` for splits that are not blocks."""
    key = (id(profile), plan.splits)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    starts = stage_starts(plan, profile)
    a = profile_arrays(profile)
    n = len(starts)
    head = n > 1 and tied_head(profile) and starts[-1] < a.n_blocks - 1
    # A stage of the head alone (a split at it): that IPU needs the tied weight too, a copy.
    alone = n > 1 and tied_head(profile) and not head
    bounds = [*starts, a.n_blocks - (1 if head else 0)]
    # A head the profile folded into the first stage's block reads the last stage's output
    # there too: that stage sends it back to IPU0 (and receives its gradient), as for BERT.
    folded = n > 1 and bool(profile.tied_head) and _folded_block(profile) < bounds[1]
    shapes = []
    for s in range(n):
        lo, hi = bounds[s], bounds[s + 1]
        peak = peak_block(a, lo, hi)
        shape = StageShape(
            stage=s,
            lo=lo,
            hi=hi,
            first_block=profile.block_stats[lo].name,
            last_block=profile.block_stats[hi - 1].name,
            params=float(a.params[hi] - a.params[lo]),
            param_ops=float(a.param_ops[hi] - a.param_ops[lo]),
            saved_el=float(a.saved_el[hi] - a.saved_el[lo]),
            input_el=float(profile.input_elements if lo == 0 else a.out_el_block[lo - 1]),
            output_el=float(a.out_el_block[hi - 1]),
            boundary_el=float(a.out_el[hi - 1] - a.out_el[lo]),
            max_live_el=float(max(a.max_live_block[lo:hi])),
            infer_live_el=float(max(a.infer_live_block[lo:hi])),
            peak_checkpoint_el=float(a.out_el[peak] - a.out_el[lo]),
            peak_block_el=float(a.saved_block[peak] + a.max_live_block[peak]),
            sends=s < n - 1 or head or folded,
        )
        if head and s == 0:
            shape = _with_head(shape, a, a.n_blocks - 1, profile.block_stats[-1].name)
        if alone and s == n - 1:
            shape = replace(shape, params=shape.params + _tied_weight(a, a.n_blocks - 1))
        if n > 1 and profile.tied_head and lo <= _folded_block(profile) < hi:
            # Its ops are already in that block's sums (`fold_head`): only its name and the
            # last stage's output it reads are marked.
            shape = replace(shape, head_block=profile.tied_head,
                            head_input_el=float(a.out_el_block[bounds[-1] - 1]))
        shapes.append(shape)
    out = tuple(shapes)
    with LOCK:
        lru_put(_CACHE, key, (profile, out), _CACHE_SIZE)
    return out


def _tied_weight(a: ProfileArrays, h: int) -> float:
    """Elements of the weight block `h` (the tied head) shares with the embeddings: its largest
    matmul's K x N, the decoder onto the vocabulary (counted once, with the embeddings, in the
    profile's parameters)."""
    ops = (a.block == h) & a.kind_mm
    return float((a.k[ops] * a.n[ops]).max(initial=0.0))


def _with_head(shape: StageShape, a: ProfileArrays, h: int, name: str) -> StageShape:
    """`shape` also running block `h`, named `name` (the tied head): its parameters, ops and
    activations."""
    return replace(
        shape,
        params=shape.params + float(a.params[h + 1] - a.params[h]),
        param_ops=shape.param_ops + float(a.param_ops[h + 1] - a.param_ops[h]),
        saved_el=shape.saved_el + float(a.saved_block[h]),
        head_saved_el=float(a.saved_block[h]),
        head_input_el=float(a.out_el_block[h - 1]),
        max_live_el=max(shape.max_live_el, float(a.max_live_block[h])),
        infer_live_el=max(shape.infer_live_el, float(a.infer_live_block[h])),
        head_lo=h,
        head_hi=h + 1,
        head_block=name,
    )


def _folded_block(profile: ModelProfile) -> int:
    """The index of the block a folded tied head was charged to (`ModelProfile.tied_head`)."""
    return profile.block_index(profile.tied_head_block)


@dataclass(frozen=True)
class HeadPlacement:
    """A tied output head that runs on an earlier pipeline stage's IPU than the last layers:
    `module` (its name in the profiled model) on stage (IPU of a replica) `stage`."""

    module: str
    stage: int


def head_placement(profile: ModelProfile, plan: ExecutionPlan) -> HeadPlacement | None:
    """Where the simulator ran a tied head, when that is not the last stage, where a program
    would run it by default (it is called after the last layer). Every export places it from
    this: it is the stage `stage_shapes` charged it to (`StageShape.head_block`)."""
    shape = _head_shape(stage_shapes(profile, plan))
    return HeadPlacement(shape.head_block, shape.stage) if shape is not None else None


def head_stage_count(shapes: Sequence[StageShape]) -> int:
    """The pipeline stages a tied head run before the last stage adds: 1, as every export runs
    it (after the last stage, on IPU0: PopTorch's AutoStage.AutoIncrement, PopART's
    pipelineStage(N)), else 0. The pipeline then has one more stage than it has IPUs."""
    return int(_head_shape(shapes) is not None)


def _head_shape(shapes: Sequence[StageShape]) -> StageShape | None:
    return next((x for x in shapes[:-1] if x.head_block), None)
