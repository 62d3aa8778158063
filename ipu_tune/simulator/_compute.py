"""Per-op cycles and temporary memory, summed per block and cached per profile.

Every op of the profile is costed at once with numpy; the result is a set of per-block prefix
sums, so a pipeline stage's forward/backward cycles are two lookups (`BlockCosts.span`). The
costs depend on the profile and on few plan knobs (micro-batch, model precision, available
memory proportion, compute tiles, train/infer), so they are cached on those: within a study
most trials hit the cache and `simulate` stays O(stages).

Model of one op (B = micro-batch, T = compute tiles, f = clock):
- conv/matmul, matmul view (M = m_per_sample x B, K, N), each pass (forward; in training the
  data gradient and the weight gradient) costs
  FLOPs / (peak FLOP/cycle/tile x T x E) x (1 / rate + o_half / o),
  peak by precision (fp16 4x fp32 on Mk2; reference table "FLOP per cycle per tile"; seed
  guide 4.6): 128 FLOP = 64 fp16 MACs per cycle per tile into half partials, the FP16.16 peak.
  rate = 1 with half partials, 1/2 with float partials (PopTorch's default), which accumulate
  in fp32 at half the AMP rate (seed hands-on: "each time the numerical precision is halved,
  the execution speed of matmul and convolution operations is doubled", citing the AI-Float
  white paper, Table 5.1). o_half / o is the AMP's fill and drain on a tile of o output
  elements of that pass (forward M x N, data gradient M x K, weight gradient K x N): a fixed
  latency per output, not sped up by half partials. What keeps half partials from doubling a
  step: that latency (large for the weight gradients of small early layers), the memory-bound
  vertices, the compute-set syncs and the exchange. E and o_half are fitted on float-partials
  (seed ladder) and half-partials (MLPerf, BERT, C600 inference) runs together, so neither
  absorbs the partials factor.
- memory-bound kinds (norm, elementwise, pool, softmax, loss, embedding, other): bytes moved
  at the tiles' SRAM bandwidth (IPU datasheets: 47.5 TB/s on Mk2) x an efficiency.
- each compute set adds a fixed overhead (BSP sync + exchange setup; PopVision execution trace)
  and conv/matmul weights are exchanged to the tiles once per serial pass.
- available memory proportion (seed guide 4.1; available-memory note): the temporary
  memory a conv/matmul would use, (M K + K N) x bytes + M N x partials (4 B float, 2 B half),
  is capped at
  AMP x T x S_tile; beyond it the op runs in ceil(need / budget) serial passes, each paying its
  compute set and weight exchange: less AMP, more cycles.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ipu_tune.hardware import IpuSpec
from ipu_tune.models import ModelProfile
from ipu_tune.simulator._constants import SimConstants
from ipu_tune.simulator._inference import inference_graph

__all__ = ["BlockCosts", "ProfileArrays", "block_costs", "peak_block", "profile_arrays"]

_MM_KINDS = ("conv", "matmul")
_REDUCE_KINDS = ("softmax", "loss")


@dataclass(frozen=True)
class ProfileArrays:
    """Per-op and per-block arrays of one profile (micro-batch independent)."""

    kind_mm: np.ndarray  # bool per op
    kind_norm: np.ndarray
    kind_reduce: np.ndarray
    block: np.ndarray  # block index per op
    fwd_flops: np.ndarray
    bwd_flops: np.ndarray
    has_params: np.ndarray  # bool per op
    op_out_el: np.ndarray
    m: np.ndarray
    k: np.ndarray
    n: np.ndarray
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
_COST_CACHE: OrderedDict[tuple[object, ...], tuple[ModelProfile, BlockCosts]] = OrderedDict()
_FAST_COST_CACHE: dict[tuple[object, ...], tuple[ModelProfile, IpuSpec, SimConstants,
                                                  BlockCosts]] = {}
_PROFILE_CACHE_SIZE = 16
_COST_CACHE_SIZE = 512
# Trials may run in threads (Optuna n_jobs); the caches are only memoisation, so a lock around
# their bookkeeping is all the thread safety they need.
_LOCK = threading.Lock()


def _prefix(values: np.ndarray) -> np.ndarray:
    out = np.zeros(len(values) + 1)
    np.cumsum(values, out=out[1:])
    return out


def profile_arrays(profile: ModelProfile) -> ProfileArrays:
    """The profile as arrays, cached on the profile object's identity (kept alive here, so
    the id cannot be reused while cached; hashing a frozen profile would cost O(ops))."""
    key = id(profile)
    with _LOCK:
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
    arrays = ProfileArrays(
        kind_mm=np.array([k in _MM_KINDS for k in kinds], dtype=bool),
        kind_norm=np.array([k == "norm" for k in kinds], dtype=bool),
        kind_reduce=np.array([k in _REDUCE_KINDS for k in kinds], dtype=bool),
        block=block,
        fwd_flops=np.array([op.forward_flops for op in ops], dtype=float),
        bwd_flops=np.array([op.backward_flops for op in ops], dtype=float),
        has_params=has_params,
        op_out_el=np.array([op.output_elements for op in ops], dtype=float),
        m=np.array([op.m_per_sample for op in ops], dtype=float),
        k=np.array([op.k for op in ops], dtype=float),
        n=np.array([op.n for op in ops], dtype=float),
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
    with _LOCK:
        _PROFILE_CACHE[key] = (profile, arrays)
        if len(_PROFILE_CACHE) > _PROFILE_CACHE_SIZE:
            _PROFILE_CACHE.popitem(last=False)
    return arrays


def peak_block(a: ProfileArrays, lo: int, hi: int) -> int:
    """Block of [lo, hi) at which recomputing block by block peaks: checkpoints of the blocks
    before it are still live (the backward frees them last to first) while its own recomputed
    activations and transients are (PopVision liveness report: tensors never live at once
    share memory)."""
    return lo + int(np.argmax(a.peak_key[lo:hi]))


@dataclass(frozen=True)
class BlockCosts:
    """Cycles and code-relevant counts per block as prefix sums (length blocks + 1)."""

    fwd_compute: list[float]  # arithmetic / SRAM streaming cycles
    fwd_exchange: list[float]  # compute-set overhead + weight exchange cycles
    bwd_compute: list[float]
    bwd_exchange: list[float]
    fwd_sets: list[float]  # compute sets (code size grows with them)
    bwd_sets: list[float]
    temp_block: tuple[float, ...]  # largest conv/matmul temporary of the block (bytes)
    max_passes: int  # most serial passes of any conv/matmul (AMP)


def block_costs(
    profile: ModelProfile,
    ipu: IpuSpec,
    micro_batch: int,
    fp16: bool,
    amp: float,
    compute_tiles: int,
    training: bool,
    c: SimConstants,
    half_partials: bool = False,
) -> BlockCosts:
    # Fast path on the identity of the IPU and the constants (a study passes the same
    # objects every trial): hashing those frozen dataclasses costs more than the rest of a
    # lookup. The entry keeps them alive, so their ids are not reused while it exists.
    fast_key = (id(profile), id(ipu), id(c), micro_batch, fp16, amp, compute_tiles, training,
                half_partials)
    fast = _FAST_COST_CACHE.get(fast_key)
    if fast is not None and fast[0] is profile and fast[1] is ipu and fast[2] is c:
        return fast[3]
    key = (id(profile), ipu, micro_batch, fp16, amp, compute_tiles, training, c, half_partials)
    with _LOCK:
        hit = _COST_CACHE.get(key)
        if hit is not None and hit[0] is profile:
            _COST_CACHE.move_to_end(key)
            costs = hit[1]
        else:
            costs = None
    if costs is None:
        costs = _block_costs(profile_arrays(profile), ipu, micro_batch, fp16, amp,
                             compute_tiles, training, c, half_partials)
        with _LOCK:
            _COST_CACHE[key] = (profile, costs)
            if len(_COST_CACHE) > _COST_CACHE_SIZE:
                _COST_CACHE.popitem(last=False)
    with _LOCK:
        if len(_FAST_COST_CACHE) >= _COST_CACHE_SIZE:
            _FAST_COST_CACHE.clear()  # the equality-keyed cache above still holds them
        _FAST_COST_CACHE[fast_key] = (profile, ipu, c, costs)
    return costs


def _block_costs(
    a: ProfileArrays, ipu: IpuSpec, micro_batch: int, fp16: bool, amp: float,
    compute_tiles: int, training: bool, c: SimConstants, half_partials: bool,
) -> BlockCosts:
    b = float(micro_batch)
    tiles = float(compute_tiles)
    act_bytes = 2.0 if fp16 else 4.0
    # Half partials apply to fp16 arithmetic (an fp32 model accumulates in fp32); fp16
    # arithmetic with float partials runs at half the FP16.16 rate (AI-Float, seed).
    half = fp16 and half_partials
    partials_bytes = 2.0 if half else 4.0
    rate = 0.5 if fp16 and not half else 1.0
    # FLOP per cycle of the AMP arithmetic at E x the precision's peak (FP16.16 for fp16).
    flops_per_cycle = ipu.peak_flops_per_s(fp16) / ipu.clock_hz / ipu.tiles * tiles * (
        c.matmul_efficiency)
    # Exchange and SRAM bandwidths per cycle shrink with the tiles left to compute.
    share = tiles / ipu.tiles
    exchange_per_cycle = ipu.exchange_bytes_per_s / ipu.clock_hz * share
    sram_per_cycle = ipu.sram_bytes_per_s / ipu.clock_hz * share * c.memory_bound_efficiency
    overhead = c.compute_set_overhead_cycles
    mm = a.kind_mm

    slow, weight_bytes, passes, temp = _conv_matmul(a, ipu, b, tiles, act_bytes,
                                                    partials_bytes, amp, rate, c)

    # Memory-bound kinds: bytes streamed per pass (read input + write output; a training norm
    # reads once more for its statistics; backward reads gradient and saved input, writes one).
    stream_el = a.op_out_el * b * act_bytes
    fwd_reads = np.where(a.kind_norm & training, 3.0, 2.0)
    fwd_mem = stream_el * fwd_reads / sram_per_cycle
    bwd_mem = stream_el * 3.0 / sram_per_cycle

    norm_sets = c.norm_compute_sets_train if training else 1.0
    sets_other = np.where(a.kind_norm, norm_sets,
                          np.where(a.kind_reduce, c.reduce_compute_sets, 1.0))
    fwd_sets = np.where(mm, passes, sets_other)

    fwd_compute = np.where(mm, a.fwd_flops * b * slow / flops_per_cycle, fwd_mem)
    fwd_exchange = fwd_sets * overhead + np.where(
        mm, weight_bytes * passes / exchange_per_cycle, 0.0)
    if not training:  # an inference graph does not run them (`_inference`)
        kept = ~a.infer_dropped
        fwd_sets, fwd_compute = fwd_sets * kept, fwd_compute * kept
        fwd_exchange = fwd_exchange * kept

    # Backward of a conv/matmul: data gradient and weight gradient, two compute sets each pass
    # (one where the profile counts only the weight gradient, e.g. the first layer).
    ratio = np.rint(a.bwd_flops / np.maximum(a.fwd_flops, 1.0))
    grads = np.where(a.fwd_flops > 0, np.clip(ratio, 1, 2), 1)
    bwd_sets = np.where(mm, grads * passes, sets_other)
    bwd_compute = np.where(mm, _backward_flops(a, b, tiles, grads, rate, c) / flops_per_cycle,
                           bwd_mem)
    wgrad_reduce = np.where(a.has_params, a.k * a.n * partials_bytes, 0.0)
    bwd_exchange = bwd_sets * overhead + np.where(
        mm, (weight_bytes * passes + wgrad_reduce) / exchange_per_cycle, 0.0
    )

    return _summed(a, training, (fwd_compute, fwd_exchange, fwd_sets),
                   (bwd_compute, bwd_exchange, bwd_sets), passes, temp)


def _amp_slowdown(outputs_per_tile: np.ndarray, rate: float, c: SimConstants) -> np.ndarray:
    """Cycles of a conv/matmul pass over those of its FLOPs at E x the FP16.16 peak: 1 / rate
    for the arithmetic (rate 1/2 with float partials), plus o_half / o for filling and draining
    the AMP pipeline on a tile of o output elements, a fixed latency per output that the
    partials type does not change."""
    out: np.ndarray = 1.0 / rate + c.matmul_half_outputs_per_tile / np.maximum(
        outputs_per_tile, 1e-9)
    return out


def _backward_flops(a: ProfileArrays, b: float, tiles: float, grads: np.ndarray, rate: float,
                    c: SimConstants) -> np.ndarray:
    """FLOPs of a conv/matmul's backward, each pass times its `_amp_slowdown`: the data
    gradient outputs M x K elements, the weight gradient K x N (reducing over the M = batch x
    positions of the micro-batch), each with its own outputs per tile; an op with one gradient
    (the first layer) runs the weight gradient only."""
    m = a.m * b
    per_grad = a.bwd_flops * b / grads
    wgrad = per_grad * _amp_slowdown(a.k * a.n / tiles, rate, c)
    dgrad = per_grad * _amp_slowdown(m * a.k / tiles, rate, c)
    out: np.ndarray = wgrad + np.where(grads > 1, dgrad, 0.0)
    return out


def _conv_matmul(
    a: ProfileArrays, ipu: IpuSpec, b: float, tiles: float, act_bytes: float,
    partials_bytes: float, amp: float, rate: float, c: SimConstants,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per conv/matmul: its forward `_amp_slowdown` (outputs M x N per tile), weight bytes,
    serial passes and temporary bytes (the available memory proportion caps the temporary)."""
    mm = a.kind_mm
    m = a.m * b
    slow = np.where(mm, _amp_slowdown(m * a.n / tiles, rate, c), 1.0)
    weight_bytes = a.k * a.n * act_bytes
    need = (m * a.k) * act_bytes + weight_bytes + m * a.n * partials_bytes
    budget = amp * tiles * ipu.sram_bytes_per_tile
    passes = np.where(mm, np.maximum(1.0, np.ceil(need / budget)), 1.0)
    temp = np.where(mm, np.minimum(need, budget), 0.0)
    return slow, weight_bytes, passes, temp


def _summed(
    a: ProfileArrays, training: bool, fwd: tuple[np.ndarray, np.ndarray, np.ndarray],
    bwd: tuple[np.ndarray, np.ndarray, np.ndarray], passes: np.ndarray, temp: np.ndarray,
) -> BlockCosts:
    """Per-op (compute, exchange, sets) of the forward and backward summed per block."""
    nb = a.n_blocks

    def per_block(x: np.ndarray) -> list[float]:
        # Python lists: a stage sums two elements, and list indexing beats numpy scalars.
        out: list[float] = _prefix(np.bincount(a.block, weights=x, minlength=nb)).tolist()
        return out

    temp_block = np.zeros(nb)
    np.maximum.at(temp_block, a.block, temp)
    if not training:
        zeros = [0.0] * (nb + 1)
        bwd_c = bwd_x = bwd_s = zeros
    else:
        bwd_c, bwd_x, bwd_s = (per_block(x) for x in bwd)
    return BlockCosts(
        fwd_compute=per_block(fwd[0]),
        fwd_exchange=per_block(fwd[1]),
        bwd_compute=bwd_c,
        bwd_exchange=bwd_x,
        fwd_sets=per_block(fwd[2]),
        bwd_sets=bwd_s,
        temp_block=tuple(float(t) for t in temp_block),
        max_passes=int(passes.max()) if len(passes) else 1,
    )
