"""A model profile as numpy arrays (per op and per block), cached per profile object.

Read by the cost model (`_compute`) and the stage shapes (`_stages`); micro-batch and plan
independent, so a study builds them once per profile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ipu_tune.models import ModelProfile
from ipu_tune.simulator._inference import inference_graph

__all__ = ["LOCK", "ProfileArrays", "lru_put", "peak_block", "profile_arrays"]

K = TypeVar("K")
V = TypeVar("V")

_MM_KINDS = ("conv", "matmul")
_REDUCE_KINDS = ("softmax", "loss")
# Trials may run in threads (Optuna n_jobs); the simulator's caches are only memoisation, so a
# lock around their bookkeeping is all the thread safety they need.
LOCK = threading.Lock()


@dataclass(frozen=True)
class ProfileArrays:
    """Per-op and per-block arrays of one profile (micro-batch independent)."""

    kind_mm: np.ndarray  # bool per op
    kind_norm: np.ndarray
    kind_reduce: np.ndarray
    block: np.ndarray  # block index per op
    mm_index: np.ndarray  # indices of the conv/matmul ops
    # block + i x blocks for i = 0..5, the ops' bins when up to six series are summed per
    # block at once (`_block_prefix`).
    block_stacked: np.ndarray
    fwd_flops: np.ndarray
    bwd_flops: np.ndarray
    has_params: np.ndarray  # bool per op
    op_out_el: np.ndarray
    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
    # Per op: K x N second-operand elements per sample when they are activations (attention's
    # keys and values), 0 where they are one shared weight (`rhs_elements`).
    rhs_el: np.ndarray
    # Per op: output channels per group of a grouped convolution (N / groups), inf elsewhere
    # (a dense op's operands can be laid out to fill the AMP; a group's channels cannot).
    n_per_group: np.ndarray
    # Per op: whether it is a vocabulary matmul (`ModelProfile.vocabulary_ops`), which
    # `plan.embedding_serialization` slices.
    vocab: np.ndarray
    # Per-block prefix sums (length blocks + 1).
    params: np.ndarray
    saved_el: np.ndarray
    param_ops: np.ndarray
    out_el: np.ndarray  # block outputs (recompute checkpoints at block boundaries)
    # Per block: outputs of the blocks before it plus its own saved and live elements, the
    # liveness peak while its recomputed forward and backward run (`peak_block`).
    peak_key: np.ndarray
    # Per-block values.
    out_el_block: tuple[int, ...]
    max_live_block: tuple[int, ...]
    # Inference graph (`_inference`): ops it drops (folded batch norm, dropout, loss) and each
    # block's liveness peak.
    infer_dropped: np.ndarray
    infer_live_block: tuple[int, ...]
    saved_block: tuple[int, ...]
    n_blocks: int


_PROFILE_CACHE: OrderedDict[int, tuple[ModelProfile, ProfileArrays]] = OrderedDict()
_PROFILE_CACHE_SIZE = 16


def _prefix(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values) + 1)
    np.cumsum(values, out=out[1:])
    return out


def profile_arrays(profile: ModelProfile) -> ProfileArrays:
    """The profile as arrays, cached on the profile object's identity (kept alive here, so
    the id cannot be reused while cached; hashing a frozen profile would cost O(ops))."""
    key = id(profile)
    with LOCK:
        hit = _PROFILE_CACHE.get(key)
        if hit is not None and hit[0] is profile:
            _PROFILE_CACHE.move_to_end(key)
            return hit[1]
    ops = profile.ops
    blocks = profile.block_stats
    out_pre = _prefix(np.array([b.output_elements for b in blocks], dtype=float))
    own = np.array([b.saved_elements + b.max_live_elements for b in blocks], dtype=float)
    kinds = [op.kind for op in ops]
    nb = len(profile.block_stats)
    block = np.array([op.block for op in ops], dtype=np.int64)
    has_params = np.array([op.parameters > 0 for op in ops], dtype=bool)
    infer = inference_graph(profile)
    kind_mm = np.array([k in _MM_KINDS for k in kinds], dtype=bool)
    arrays = ProfileArrays(
        kind_mm=kind_mm,
        kind_norm=np.array([k == "norm" for k in kinds], dtype=bool),
        kind_reduce=np.array([k in _REDUCE_KINDS for k in kinds], dtype=bool),
        block=block,
        mm_index=np.flatnonzero(kind_mm),
        block_stacked=np.concatenate([block + i * nb for i in range(6)]),
        fwd_flops=np.array([op.forward_flops for op in ops], dtype=float),
        bwd_flops=np.array([op.backward_flops for op in ops], dtype=float),
        has_params=has_params,
        op_out_el=np.array([op.output_elements for op in ops], dtype=float),
        m=np.array([op.m_per_sample for op in ops], dtype=float),
        k=np.array([op.k for op in ops], dtype=float),
        n=np.array([op.n for op in ops], dtype=float),
        rhs_el=np.array([op.rhs_per_sample * op.k * op.n for op in ops], dtype=float),
        n_per_group=np.array([op.n / op.groups if op.groups > 1 else np.inf for op in ops],
                             dtype=float),
        vocab=np.isin(np.arange(len(ops)), profile.vocabulary_ops),
        params=_prefix(np.array([b.parameters for b in profile.block_stats], dtype=float)),
        saved_el=_prefix(np.array([b.saved_elements for b in profile.block_stats], dtype=float)),
        param_ops=_prefix(np.bincount(block, weights=has_params.astype(float), minlength=nb)),
        out_el=out_pre,
        peak_key=out_pre[:-1] + own,
        out_el_block=tuple(b.output_elements for b in profile.block_stats),
        max_live_block=tuple(b.max_live_elements for b in profile.block_stats),
        infer_dropped=np.array(infer.dropped, dtype=bool),
        infer_live_block=infer.live_block,
        saved_block=tuple(b.saved_elements for b in profile.block_stats),
        n_blocks=nb,
    )
    with LOCK:
        lru_put(_PROFILE_CACHE, key, (profile, arrays), _PROFILE_CACHE_SIZE)
    return arrays


def lru_put(cache: OrderedDict[K, V], key: K, value: V, size: int) -> None:
    """Put `value` in the LRU `cache` of `size` entries (under `LOCK`)."""
    cache[key] = value
    if len(cache) > size:
        cache.popitem(last=False)


def peak_block(a: ProfileArrays, lo: int, hi: int) -> int:
    """Block of [lo, hi) at which recomputing block by block peaks: checkpoints of the blocks
    before it are still live (the backward frees them last to first) while its own recomputed
    activations and transients are (PopVision liveness report: tensors never live at once
    share memory)."""
    return lo + int(np.argmax(a.peak_key[lo:hi]))
