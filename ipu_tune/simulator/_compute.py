"""Per-op cycles and temporary memory, summed per block and cached per profile.

Every op of the profile is costed at once with numpy; the result is a set of per-block prefix
sums, so a pipeline stage's forward/backward cycles are two lookups (`BlockCosts.span`). The
costs depend on the profile and on few plan knobs (micro-batch, model precision, available
memory proportion, compute tiles, train/infer), so they are cached on those: within a study
most trials hit the cache and `simulate` stays O(stages). The available memory proportion
enters only through the conv/matmuls' serial passes and the temporary cap, so a new value
reuses the rest of its key's costs (`_costed`) and, when its passes were seen before,
their block sums too (`_amp_costs`).

Model of one op (B = micro-batch, T = compute tiles, f = clock):
- conv/matmul, matmul view (M = m_per_sample x B, K, N), each pass (forward; in training the
  data gradient and the weight gradient) costs
  FLOPs / (peak FLOP/cycle/tile x T x E) x (1 / rate + o_half / o),
  peak by precision (fp16 4x fp32 on Mk2; reference table "FLOP per cycle per tile"; seed
  guide 4.6): 128 FLOP = 64 fp16 MACs per cycle per tile into half partials, the FP16.16 peak.
  rate = 1 with half partials, 1/2 with float partials (PopTorch's default), which accumulate
  in fp32 at half the AMP rate (seed hands-on: "each time the numerical precision is halved,
  the execution speed of matmul and convolution operations is doubled", citing the AI-Float
  white paper, Table 5.1), times min(1, (N / groups) / U) for a grouped convolution: the AMP
  computes U output channels of one group at once (its conv units, `IpuSpec.amp_conv_units`:
  16 at FP16.16 on Mk2, 8 with float partials), so a depthwise convolution (1 per group) runs
  at 1/16 of the peak, the vector unit's 4 MACs per cycle; Graphcore's EfficientNet on the
  IPU uses groups of 16 channels for this (Masters et al. 2021). o_half / o is the AMP's fill
  and drain on a tile of o output elements of that pass (forward M x N, data gradient M x K,
  weight gradient K x N, or for an activation second operand, attention's keys and values,
  its B x rhs K x N): a fixed latency per output, not sped up by half partials. What keeps
  half partials from doubling a step: that latency (large for the weight gradients of small
  early layers), the memory-bound vertices, the compute-set syncs and the exchange. E and
  o_half are fitted on float-partials (seed ladder) and half-partials (MLPerf, BERT, C600
  inference) runs together, so neither absorbs the partials factor.
- memory-bound kinds (norm, elementwise, pool, softmax, loss, embedding, other): bytes moved
  at the tiles' SRAM bandwidth (IPU datasheets: 47.5 TB/s on Mk2) x an efficiency.
- each compute set adds a fixed overhead (BSP sync + exchange setup; PopVision execution trace)
  and conv/matmul second operands (weights; in attention, the micro-batch's keys and values)
  are exchanged to the tiles once per serial pass.
- available memory proportion (seed guide 4.1; available-memory note): the temporary
  memory a conv/matmul would use, (M K + R) x bytes + M N x partials (4 B float, 2 B half),
  R its second operand's elements (K N, or B x rhs K N for an activation),
  is capped at
  AMP x T x S_tile; beyond it the op runs in ceil(need / budget) serial passes, each paying its
  compute set and weight exchange and, beyond the first, its fill and drain again (o_half / o
  per pass, the arithmetic once): less AMP, more cycles.
- embedding serialization (`plan.embedding_serialization`, S): a vocabulary matmul runs in S
  slices of its output channels, each a serial pass of need / S and weight / S, whose passes
  under the AMP are counted per slice.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ipu_tune.hardware import IpuSpec
from ipu_tune.models import ModelProfile
from ipu_tune.simulator._arrays import LOCK, ProfileArrays, lru_put, profile_arrays
from ipu_tune.simulator._constants import SimConstants

__all__ = ["BlockCosts", "block_costs"]


_COST_CACHE: OrderedDict[tuple[object, ...], tuple[ModelProfile, BlockCosts]] = OrderedDict()
_FAST_COST_CACHE: dict[tuple[object, ...], tuple[ModelProfile, IpuSpec, SimConstants,
                                                  BlockCosts]] = {}
# `_costed`, on the key of `block_costs` without the AMP (a study draws few micro-batch,
# precision and I/O tile values), and the block sums of one of them by the conv/matmuls' serial
# passes (`_amp_costs`: most AMP values give the same passes).
_FIXED_CACHE: OrderedDict[tuple[object, ...], tuple[ModelProfile, IpuSpec, SimConstants,
                                                    _Fixed]] = OrderedDict()
_SUMS_CACHE: OrderedDict[tuple[int, bytes], tuple[_Fixed, list[list[float]], int]] = (
    OrderedDict())
_COST_CACHE_SIZE = 512
_FIXED_CACHE_SIZE = 1024
_SUMS_CACHE_SIZE = 2048


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
    serialization: int = 1,
) -> BlockCosts:
    # Fast paths on the identity of the IPU and the constants (a study passes the same
    # objects every trial): hashing those frozen dataclasses costs more than the rest of a
    # lookup. The entries keep them alive, so their ids are not reused while they exist.
    fast_key = (id(profile), id(ipu), id(c), micro_batch, fp16, amp, compute_tiles, training,
                half_partials, serialization)
    fast = _FAST_COST_CACHE.get(fast_key)
    if fast is not None and fast[0] is profile and fast[1] is ipu and fast[2] is c:
        return fast[3]
    budget = amp * float(compute_tiles) * ipu.sram_bytes_per_tile
    fixed_key = (id(profile), id(ipu), id(c), micro_batch, fp16, compute_tiles, training,
                 half_partials, serialization)
    with LOCK:
        hit = _FIXED_CACHE.get(fixed_key)
        if hit is not None and hit[0] is profile and hit[1] is ipu and hit[2] is c:
            _FIXED_CACHE.move_to_end(fixed_key)
    if hit is not None and hit[0] is profile and hit[1] is ipu and hit[2] is c:
        costs = _amp_costs(profile_arrays(profile), hit[3], budget)
    else:
        key = (id(profile), ipu, micro_batch, fp16, amp, compute_tiles, training, c,
               half_partials, serialization)
        with LOCK:
            found = _COST_CACHE.get(key)
            if found is not None and found[0] is profile:
                _COST_CACHE.move_to_end(key)
        if found is not None and found[0] is profile:
            costs = found[1]
        else:
            a = profile_arrays(profile)
            fixed = _costed(a, ipu, micro_batch, fp16, compute_tiles, training, c,
                            half_partials, serialization)
            costs = _amp_costs(a, fixed, budget)
            with LOCK:
                lru_put(_FIXED_CACHE, fixed_key, (profile, ipu, c, fixed), _FIXED_CACHE_SIZE)
                lru_put(_COST_CACHE, key, (profile, costs), _COST_CACHE_SIZE)
    with LOCK:
        if len(_FAST_COST_CACHE) >= _COST_CACHE_SIZE:
            _FAST_COST_CACHE.clear()  # the equality-keyed cache above still holds them
        _FAST_COST_CACHE[fast_key] = (profile, ipu, c, costs)
    return costs


@dataclass(frozen=True)
class _Fixed:
    """The costs of one `block_costs` key but the AMP: the per-block compute prefix sums, and
    the per-op arrays the AMP's serial passes scale (`_amp_costs`)."""

    fwd_compute: list[float]
    bwd_compute: list[float]
    need_block: np.ndarray  # per block: the largest `need_mm` of its ops (0: none)
    sets_other: np.ndarray  # per op: compute sets of the memory-bound kinds
    kept: np.ndarray | None  # per op: whether the inference graph runs it (None: training)
    # Per conv/matmul (`ProfileArrays.mm_index`): its serial slices (`plan.embedding_
    # serialization` of a vocabulary matmul, else 1), the temporary bytes and weight bytes of
    # one slice uncapped, its backward's gradients (1 or 2) and weight-gradient reduction bytes.
    slices_mm: np.ndarray
    need_mm: np.ndarray
    weight_bytes_mm: np.ndarray
    grads_mm: np.ndarray
    wgrad_reduce_mm: np.ndarray
    # Per conv/matmul: the cycles of its forward's and its backward's AMP fill and drain in one
    # pass (`_fill`), which each further serial pass pays again.
    fill_fwd_mm: np.ndarray
    fill_bwd_mm: np.ndarray
    overhead: float
    exchange_per_cycle: float


def _costed(
    a: ProfileArrays, ipu: IpuSpec, micro_batch: int, fp16: bool, compute_tiles: int,
    training: bool, c: SimConstants, half_partials: bool, serialization: int,
) -> _Fixed:
    """Every op costed for one `block_costs` key but the AMP (the model of one op: module
    docstring)."""
    b, tiles, act_bytes = float(micro_batch), float(compute_tiles), 2.0 if fp16 else 4.0
    half = fp16 and half_partials
    partials_bytes = 2.0 if half else 4.0
    rate = _rate(a, ipu, fp16, half)
    # FLOP per cycle of the AMP arithmetic at E x the precision's peak (FP16.16 for fp16).
    flops_per_cycle = ipu.peak_flops_per_s(fp16) / ipu.clock_hz / ipu.tiles * tiles * (
        c.matmul_efficiency)
    exchange_per_cycle, sram_per_cycle = _bandwidths(ipu, tiles, c)
    mm = a.kind_mm

    slow, weight_bytes, need, slices = _conv_matmul(a, b, tiles, act_bytes, partials_bytes,
                                                    rate, c, serialization)
    fill_fwd = a.fwd_flops * b / flops_per_cycle * _fill(a.m * b * a.n / tiles, c)

    # Memory-bound kinds: bytes streamed per pass (read input + write output; a training norm
    # reads once more for its statistics; backward reads gradient and saved input, writes one).
    stream_el = a.op_out_el * b * act_bytes
    fwd_reads = np.where(a.kind_norm & training, 3.0, 2.0)
    fwd_mem = stream_el * fwd_reads / sram_per_cycle

    norm_sets = c.norm_compute_sets_train if training else 1.0
    sets_other = np.where(a.kind_norm, norm_sets,
                          np.where(a.kind_reduce, c.reduce_compute_sets, 1.0))
    fwd_compute = np.where(mm, a.fwd_flops * b * slow / flops_per_cycle, fwd_mem)
    # An inference graph does not run the ops it drops (`_inference`).
    kept = None if training else ~a.infer_dropped
    compute = [fwd_compute] if kept is None else [fwd_compute * kept]

    # Backward of a conv/matmul: data gradient and weight gradient, two compute sets each pass
    # (one where the profile counts only the weight gradient, e.g. the first layer).
    ratio = np.rint(a.bwd_flops / np.maximum(a.fwd_flops, 1.0))
    grads = np.where(a.fwd_flops > 0, np.clip(ratio, 1, 2), 1)
    # Its gradients' arithmetic at the partials' rate plus each one's fill and drain (an
    # inference graph runs no backward: its fill is never read, `_passes_sums`).
    fill_bwd = _backward_fill(a, b, tiles, grads, c) / flops_per_cycle if training else fill_fwd
    if training:
        bwd_mm = a.bwd_flops * b / rate / flops_per_cycle + fill_bwd
        compute.append(np.where(mm, bwd_mm, stream_el * 3.0 / sram_per_cycle))
    wgrad_reduce = np.where(a.has_params, a.k * a.n * partials_bytes, 0.0)
    # The largest temporary of a block is the largest need capped by the AMP budget (the cap
    # is monotone, so capping the block's largest need is the same number).
    need_block = np.zeros(a.n_blocks)
    np.maximum.at(need_block, a.block, np.where(mm, need, 0.0))
    sums = _block_prefix(a, compute)
    at = a.mm_index
    return _Fixed(
        fwd_compute=sums[0], bwd_compute=sums[1] if training else [0.0] * (a.n_blocks + 1),
        need_block=need_block, sets_other=sets_other, kept=kept, slices_mm=slices[at],
        need_mm=need[at],
        weight_bytes_mm=weight_bytes[at], grads_mm=grads[at], wgrad_reduce_mm=wgrad_reduce[at],
        fill_fwd_mm=fill_fwd[at], fill_bwd_mm=fill_bwd[at],
        overhead=c.compute_set_overhead_cycles, exchange_per_cycle=exchange_per_cycle,
    )


def _bandwidths(ipu: IpuSpec, tiles: float, c: SimConstants) -> tuple[float, float]:
    """Exchange and SRAM bytes per cycle of the compute tiles (both shrink with the tiles left
    to compute), SRAM at the memory-bound kinds' efficiency."""
    share = tiles / ipu.tiles
    return (ipu.exchange_bytes_per_s / ipu.clock_hz * share,
            ipu.sram_bytes_per_s / ipu.clock_hz * share * c.memory_bound_efficiency)


def _amp_costs(a: ProfileArrays, f: _Fixed, budget: float) -> BlockCosts:
    """The block costs of `f` under the AMP's temporary `budget` (bytes): beyond it a
    conv/matmul (each slice of a serialized one) runs in ceil(need / budget) serial passes,
    its temporary capped at it."""
    passes_mm = f.slices_mm * np.maximum(1.0, np.ceil(f.need_mm / budget))
    key = (id(f), passes_mm.tobytes())  # the entry keeps `f` alive: its id is not reused
    with LOCK:
        hit = _SUMS_CACHE.get(key)
        if hit is not None and hit[0] is f:
            _SUMS_CACHE.move_to_end(key)
    if hit is None or hit[0] is not f:
        hit = f, _passes_sums(a, f, passes_mm), int(passes_mm.max()) if len(passes_mm) else 1
        with LOCK:
            lru_put(_SUMS_CACHE, key, hit, _SUMS_CACHE_SIZE)
    _, sums, max_passes = hit
    zeros = [0.0] * (a.n_blocks + 1)
    training = f.kept is None
    return BlockCosts(
        fwd_compute=_added(f.fwd_compute, sums[2]),
        fwd_exchange=sums[0],
        bwd_compute=_added(f.bwd_compute, sums[5]) if training else zeros,
        bwd_exchange=sums[3] if training else zeros,
        fwd_sets=sums[1],
        bwd_sets=sums[4] if training else zeros,
        temp_block=tuple(np.minimum(f.need_block, budget).tolist()),
        max_passes=max_passes,
    )


def _passes_sums(a: ProfileArrays, f: _Fixed, passes_mm: np.ndarray) -> list[list[float]]:
    """Per-block prefix sums of the forward exchange, compute sets and extra compute (and in
    training the backward's), each conv/matmul pass paying its compute sets, its weight
    exchange and, beyond the first, its AMP fill and drain again: a pass computes a share of
    the outputs (or of the reduction) with the same latency per output on each tile, so P
    passes pay that latency P times. `_mm_or` places the conv/matmuls' values among the other
    ops'."""
    again = passes_mm - 1.0
    fwd_sets = _mm_or(a, f.sets_other, passes_mm)
    fwd_exchange = fwd_sets * f.overhead + _mm_or(
        a, 0.0, f.weight_bytes_mm * passes_mm / f.exchange_per_cycle)
    fwd_fill = _mm_or(a, 0.0, f.fill_fwd_mm * again)
    if f.kept is not None:
        return _block_prefix(a, [fwd_exchange * f.kept, fwd_sets * f.kept, fwd_fill * f.kept])
    bwd_sets = _mm_or(a, f.sets_other, f.grads_mm * passes_mm)
    bwd_exchange = bwd_sets * f.overhead + _mm_or(
        a, 0.0, (f.weight_bytes_mm * passes_mm + f.wgrad_reduce_mm) / f.exchange_per_cycle)
    bwd_fill = _mm_or(a, 0.0, f.fill_bwd_mm * again)
    return _block_prefix(a, [fwd_exchange, fwd_sets, fwd_fill, bwd_exchange, bwd_sets,
                             bwd_fill])


def _added(base: list[float], extra: list[float]) -> list[float]:
    """Two per-block prefix sums added (a stage's costs are differences of one list)."""
    return [x + y for x, y in zip(base, extra, strict=True)]


def _mm_or(a: ProfileArrays, other: np.ndarray | float, mm_values: np.ndarray) -> np.ndarray:
    """Per op: `mm_values` at the conv/matmuls, `other` elsewhere (np.where(a.kind_mm, ...,
    other), from the conv/matmuls' values alone)."""
    out = other.copy() if isinstance(other, np.ndarray) else np.full(len(a.block), other)
    out[a.mm_index] = mm_values
    return out


def _block_prefix(a: ProfileArrays, series: list[np.ndarray]) -> list[list[float]]:
    """Per-op series summed per block, as prefix sums (length blocks + 1 each): one bincount
    over the series laid end to end (series i's ops in bins i x blocks + block), one cumsum.
    The sums are those of one bincount and one cumsum per series, bit for bit: bincount adds
    the weights into their bins in index order (numpy/_core/src/multiarray/compiled_base.c,
    `arr_bincount`) and cumsum accumulates along each row in order.
    Python lists: a stage sums two elements, and list indexing beats numpy scalars."""
    k, nb = len(series), a.n_blocks
    weights = np.concatenate(series)
    per_block = np.bincount(a.block_stacked[: len(weights)], weights=weights, minlength=k * nb)
    out = np.zeros((k, nb + 1))
    np.cumsum(per_block.reshape(k, nb), axis=1, out=out[:, 1:])
    rows: list[list[float]] = out.tolist()
    return rows


def _rate(a: ProfileArrays, ipu: IpuSpec, fp16: bool, half: bool) -> np.ndarray:
    """Per op: the AMP's arithmetic rate over the FP16.16 peak (the precision's own for fp32).
    Half partials apply to fp16 arithmetic (an fp32 model accumulates in fp32); fp16 with
    float partials runs at half the rate (AI-Float, seed). A grouped convolution fills N /
    groups of the AMP's conv units per group (depthwise: 1 of 16 at FP16.16, the vector unit's
    4 MACs per cycle), whatever the partials type."""
    units = ipu.amp_conv_units(fp16, half)
    out: np.ndarray = (0.5 if fp16 and not half else 1.0) * np.minimum(
        1.0, a.n_per_group / units)
    return out


def _amp_slowdown(outputs_per_tile: np.ndarray, rate: np.ndarray,
                  c: SimConstants) -> np.ndarray:
    """Cycles of a conv/matmul pass over those of its FLOPs at E x the FP16.16 peak: 1 / rate
    for the arithmetic (rate 1/2 with float partials), plus `_fill`."""
    out: np.ndarray = 1.0 / rate + _fill(outputs_per_tile, c)
    return out


def _fill(outputs_per_tile: np.ndarray, c: SimConstants) -> np.ndarray:
    """o_half / o: filling and draining the AMP pipeline on a tile of o output elements, over
    the cycles of the FLOPs at E x the peak: a fixed latency per output that the partials type
    does not change."""
    out: np.ndarray = c.matmul_half_outputs_per_tile / np.maximum(outputs_per_tile, 1e-9)
    return out


def _backward_fill(a: ProfileArrays, b: float, tiles: float, grads: np.ndarray,
                   c: SimConstants) -> np.ndarray:
    """The FLOP-equivalents of a conv/matmul's backward fill and drain in one pass: the data
    gradient outputs M x K elements, the weight gradient K x N (reducing over the M = batch x
    positions of the micro-batch), each with its own outputs per tile; an op with one gradient
    (the first layer) runs the weight gradient only."""
    per_grad = a.bwd_flops * b / grads
    wgrad = per_grad * _fill(_rhs_elements(a, b) / tiles, c)
    dgrad = per_grad * _fill(a.m * b * a.k / tiles, c)
    out: np.ndarray = wgrad + np.where(grads > 1, dgrad, 0.0)
    return out


def _rhs_elements(a: ProfileArrays, b: float) -> np.ndarray:
    """Per op: elements of a conv/matmul's second operand for a micro-batch of `b`: one K x N
    weight that every sample shares, or each sample's own (attention's keys and values per
    head), which grow with the micro-batch. The second operand is what the tiles exchange per
    pass and, in backward, what the "weight" gradient outputs: a Linear's K x N reduced over
    the batch, an attention's per-sample matrices reduced over nothing."""
    out: np.ndarray = np.where(a.rhs_el > 0, a.rhs_el * b, a.k * a.n)
    return out


def _conv_matmul(
    a: ProfileArrays, b: float, tiles: float, act_bytes: float, partials_bytes: float,
    rate: np.ndarray, c: SimConstants, serialization: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per conv/matmul: its forward `_amp_slowdown` (outputs M x N per tile), and per serial
    slice its weight bytes and the temporary bytes it would use uncapped (the available memory
    proportion caps it, `_amp_costs`), and its slices: a serialized vocabulary matmul runs its
    output channels in slices, each holding a share of the weight and of the partials
    (PopTorch serializedMatMul, OutputChannels); every other op is one."""
    mm = a.kind_mm
    m = a.m * b
    slow = np.where(mm, _amp_slowdown(m * a.n / tiles, rate, c), 1.0)
    slices = np.where(a.vocab, float(serialization), 1.0)
    weight_bytes = _rhs_elements(a, b) * act_bytes
    need = (m * a.k) * act_bytes + weight_bytes + m * a.n * partials_bytes
    return slow, weight_bytes / slices, need / slices, slices
