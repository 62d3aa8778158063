"""Free constants of the simulator, with their provenance.

Two kinds live here. *Fitted* constants (`FITTED`, seven) have no public figure; they were
settled by least squares in log space against the measured runs of
`ipu_tune/calibration/points.yaml` (the seed ResNet-101 tutorial ladder and its execution
traces, the pipelining tutorial, MLPerf ResNet-50 on a Mk2 POD16, a Mk2 POD64 and a Bow POD16,
BERT-Large SL128 on a Bow POD16 and the BERT-Base SL512 configuration that must fit)
with `ipu_tune.calibration.fit_constants` (`python -m ipu_tune calibrate` refits them from a
user's own measurements). *Read/estimate* constants cite their source and are not fitted; the
topology and host figures (IPU-Machines, IPU-Link domains, GW-Links, servers) live in
`ipu_tune.hardware` with theirs.

Current fit (simulator 3.2.0, kept in 3.3.0 to 3.11.0, which move no point's rate by more than
0.1 %: every point encoded as
run, the MLPerf ResNet-50, BERT and C600 inference points with half partials; a conv/matmul pass
costs its FLOPs at E x the FP16.16 peak times (1 / rate + o_half / o): the arithmetic at the
partials' rate (float partials: half) plus a fill/drain latency per output that the partials
type does not change, with o the pass's own outputs per tile (forward M x N, data gradient M x
K, weight gradient K x N, or each sample's own keys and values in attention); gradients all-
reduced in merged 50 MB buffers over the IPU-Links a ring uses, and a pipeline stage's copy to
the next IPU over the same links; a tied MLM head on IPU0; a token sample streams every input
tensor it stores; Nelder-Mead, 3 rounds of 3,000 evaluations): loss 0.0049 over the 15 points;
the seed ladder's rates within 1.3% and traces within 1.1%, MLPerf ResNet-50 POD16 +2.5%, POD64
+1.0%, Bow POD16 -3.0%, BERT-Large SL128 Bow POD16 +3.9%, ResNet-50 inference on a C600 -3.1%,
the MNIST tutorial -1.3%, BERT-Base SL512 fits, and so do the single-IPU inference
configurations ResNet-50 at batch 80 and BERT-Large SQuAD SL128 at 18. `stream_latency_s` (0.17
ms, a host sync per exposed stream copy) is carried mostly by the MNIST tutorial and BERT's
2,048 micro-batches per step. Memory constants are estimates chosen inside the window the seed's
fit / out-of-memory verdicts, MLPerf and the BERT-Base SL512 fit leave (`python -m ipu_tune
calibrate --check` prints each row's fullest IPU or tile).

A `SimConstants` is frozen and hashable so that `simulate(..., constants=...)` can key its
caches on it; `constants_from_mapping` builds one from a YAML mapping (unknown keys rejected).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ipu_tune.errors import IpuTuneError, bad_value, bound_text, key_name

__all__ = [
    "DEFAULT_CONSTANTS",
    "FITTED",
    "OPTIMIZER_STATE",
    "REFITTABLE",
    "OptimizerState",
    "SimConstants",
    "constants_from_mapping",
    "state_bytes_per_param",
]


@dataclass(frozen=True)
class SimConstants:
    # ---- fitted (calibration/points.yaml; see FITTED) -------------------------------------
    # Fraction of the precision's peak FLOP rate a large convolution/matmul sustains on the AMP
    # units (seed guide 4.6: fp16 halves the cycles of the arithmetic; reference: FP16 peak).
    matmul_efficiency: float = 0.4699
    # Output elements per compute tile at which filling and draining the AMP pipeline costs as
    # much as the arithmetic at the FP16.16 rate (a fixed latency per output, whatever the
    # partials type): a tile with little work spends its time there.
    # Each pass has its own outputs: forward M x N, data gradient M x K, weight gradient K x N
    # (few outputs per tile for the small weights of early conv layers).
    matmul_half_outputs_per_tile: float = 74.73
    # Cycles of one compute set besides its arithmetic: the BSP sync and the exchange setup
    # (PopVision execution trace: Sync / Exchange / OnTileExecute; seed guide 4.8).
    compute_set_overhead_cycles: float = 2005.0
    # Latency of one host-to-IPU stream transfer, exposed when the prefetch depth is 1 (seed
    # guide 4.4.1); the bytes then move at the path's bandwidth (`_host.stream_copy_s`).
    stream_latency_s: float = 1.728e-04
    # Device time of one training call besides its steps: host sync, stream setup, result copy
    # (seed traces: T(GA, DI) = DI x T_step(GA) + T_call; inference: `infer_call_overhead_s`).
    call_overhead_s: float = 0.02395
    # Host seconds to load and augment one sample on one worker (seed: sync 8-bit I/O rate).
    preprocess_s_per_sample: float = 0.0001761
    # Host dtype conversion + normalisation per input element (seed: sync fp16 vs 8-bit rates).
    convert_s_per_element: float = 5.101e-08

    # ---- read or estimated (not fitted) ---------------------------------------------------
    # Memory-bound vertices (norm, elementwise, pool, softmax) stream from SRAM at this share of
    # its read bandwidth (estimate: one 64-bit load per cycle of the 6 workers' 24 B/cycle).
    # Left free, the fit runs it to its bound, 1.0 (loss 0.0038 there, 0.0049 at 0.33):
    # the SRAM's whole bandwidth, which no vertex streams at; kept at the estimate.
    memory_bound_efficiency: float = 0.33
    # Device time of one inference call besides its steps (estimate, not fitted: no public
    # figure; a few host syncs over PCIe at ~2-5 us each plus the runtime's run call, tens of
    # us. The one inference measurement, at 128 device iterations, cannot settle it: 1 ms more
    # per call moves it by 0.3%).
    infer_call_overhead_s: float = 5.0e-05
    # IPU-Link efficiency of a transfer (read: poplibs lib/poplibs_test/Util.cpp cost model).
    ipu_link_efficiency: float = 0.85
    # Gradients merged into all-reduce buffers of this size (read: the MLPerf ResNet-50 TF1
    # configs, `max_cross_replica_buffer_size: 52428800`).
    all_reduce_buffer_bytes: float = 52428800.0
    # IPU-Links a ring hop uses inside a POD (estimate: the IPU-POD ladder joins an IPU to each
    # ring neighbour by 2 links; the other links serve other rings or stay idle).
    ring_links_per_hop: float = 2.0
    # Sync latency per hop, counted twice (read: poplibs' IPU cost model, 15 ns per hop).
    sync_latency_s: float = 30e-9
    # Compute sets per op and pass (estimate, PopVision program trees: a training batch norm is
    # a statistics reduction, a normalisation and a scale; softmax/loss reduce then map).
    norm_compute_sets_train: float = 3.0
    reduce_compute_sets: float = 2.0
    # Vertex state + control code per compute set and its internal exchange code (estimate
    # scaled from the seed guide's Table 4.1: BERT-Large 92 MB control + 108 MB internal
    # exchange code over ~1,700 compute sets per IPU-program of 4 IPUs).
    code_bytes_per_compute_set: float = 115e3
    exchange_code_bytes_per_compute_set: float = 85e3
    # Codelets (vertex code) loaded on every IPU and the host exchange code (estimate from the
    # same table: host exchange code 66 MB over 4 IPUs, mostly stream handling).
    vertex_code_bytes: float = 12e6
    host_exchange_code_bytes: float = 8e6
    # Global exchange code per IPU: a base, plus the code of each ring step of the gradient
    # all-reduce (estimate from Table 4.1, BERT-Large on 4 IPUs: 1.04 MB with 1 replica,
    # 0.26 MB per IPU; 4.66 MB with 4 replicas, one per IPU-Machine, a ring of 4 machines,
    # 6 steps: (4.66 - 1.04) / 4 / 6 = 0.15 MB per step per IPU). Linear in replicas within a
    # ring, as the table; a hierarchical all-reduce of 256 replicas takes 42 steps, not 255.
    global_exchange_bytes: float = 0.26e6
    global_exchange_bytes_per_ring_step: float = 0.15e6
    # Compute sets a replicated training program adds per merged gradient buffer, on every IPU
    # of the stage: its all-reduce's reduce-scatter and all-gather, each with the control and
    # internal exchange code of a compute set (above), as Table 4.1 has both grow when the
    # program is replicated. Estimate from the table: from 1 to 4 replicas the control and
    # internal exchange code of BERT-Large on 4 IPUs grow by 43.7 MB, over the 15 buffers of
    # its gradients (3 + 4 + 4 + 4 here), 14.6 compute sets of 200 kB each per buffer. Taken
    # not to grow with the ring's steps: the table gives one replica count, and the seed
    # states linear growth for the global exchange code alone (below its base).
    all_reduce_compute_sets_per_buffer: float = 15.0
    # Most-loaded tile: code and exchange code concentrate on the tiles that run many vertices
    # (PopVision memory report: always-live memory per tile is uneven); variables are spread
    # by Poplar's balanced tile mapping (estimate).
    always_live_tile_imbalance: float = 0.20
    variable_tile_imbalance: float = 0.04
    # I/O tiles lose ~5% of their memory to exchange code and buffers (seed guide 4.4.2).
    io_tile_overhead: float = 1.05
    # Optimizer update cycles per parameter on one tile (estimate: a fused vertex touching each
    # state once, a few vector instructions per element).
    weight_update_cycles_per_element: float = 6.0

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}

    def fitted_dict(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in FITTED}

    def with_values(self, values: Mapping[str, float]) -> SimConstants:
        return replace(self, **dict(values))


# The constants the calibration adjusts, with their search bounds (log space).
FITTED: dict[str, tuple[float, float]] = {
    "matmul_efficiency": (0.05, 1.0),
    "matmul_half_outputs_per_tile": (1.0, 5000.0),
    "compute_set_overhead_cycles": (200.0, 50_000.0),
    "stream_latency_s": (1e-6, 5e-3),
    "call_overhead_s": (1e-4, 0.2),
    "preprocess_s_per_sample": (1e-6, 1e-2),
    "convert_s_per_element": (1e-10, 1e-6),
}

# Constants a user's own runs may refit (`calibrate --fit NAME`): `FITTED`, and estimates
# the package's runs cannot settle, with their search bounds. The inference call's cost:
# the one shipped inference run calls the device every 128 micro-batches, where 50 us is
# 0.01 % of a call; runs at one device iteration settle it.
REFITTABLE: dict[str, tuple[float, float]] = {
    **FITTED,
    "infer_call_overhead_s": (1e-6, 5e-3),
}

DEFAULT_CONSTANTS = SimConstants()


@dataclass(frozen=True)
class OptimizerState:
    """What an optimizer keeps per parameter besides the weight."""

    moments: int  # first (and second) moment tensors
    # With an fp16 model: the second moment stays fp32 (seed: poptorch AdamW with a .16 model,
    # second_order_momentum_accum_type=float32; first moment and accumulators fp16).
    second_moment_fp32: bool
    # Keeps an fp32 master copy of fp16 weights. PopTorch's optimizers update fp16 weights in
    # place (with stochastic rounding), so none of the presets does.
    master_weights_fp32: bool = False


OPTIMIZER_STATE: dict[str, OptimizerState] = {
    "sgd": OptimizerState(moments=0, second_moment_fp32=False),
    "momentum": OptimizerState(moments=1, second_moment_fp32=False),
    "adam": OptimizerState(moments=2, second_moment_fp32=True),
    "adamw": OptimizerState(moments=2, second_moment_fp32=True),
    "lamb": OptimizerState(moments=2, second_moment_fp32=True),
}


def state_bytes_per_param(optimizer: str, fp16: bool) -> float:
    """On-chip optimizer state per parameter: moments in the model precision, the second moment
    fp32 where the optimizer keeps it so, plus an fp32 master copy where one is kept."""
    spec = OPTIMIZER_STATE[optimizer]
    wb = 2.0 if fp16 else 4.0
    out = wb if spec.moments >= 1 else 0.0
    if spec.moments >= 2:
        out += 4.0 if spec.second_moment_fp32 else wb
    if spec.master_weights_fp32 and fp16:
        out += 4.0
    return out


# A constant that is not fitted may move this many times from its shipped value either way:
# wide enough for any machine or framework setting, narrow enough that a typo (1e-300, an
# exponent's sign) cannot turn a rate into a figure of no meaning.
_UNFITTED_SPAN = 1000.0


def _constant_range(key: str) -> tuple[float, float]:
    """The values a constants file may give `key`: a fitted constant's search bounds (what
    `calibrate --output` can write), another within `_UNFITTED_SPAN` of its shipped value; an
    efficiency (a share of a peak) at most 1."""
    if key in REFITTABLE:
        return REFITTABLE[key]
    shipped = float(getattr(DEFAULT_CONSTANTS, key))
    # To 12 digits, as printed: 0.00105, not 0.0010500000000000002 (which 0.00105 is below).
    low, high = (float(f"{v:.12g}") for v in (shipped / _UNFITTED_SPAN, shipped * _UNFITTED_SPAN))
    return low, min(high, 1.0) if key.endswith("_efficiency") else high


def constants_from_mapping(
    values: Mapping[str, Any], base: SimConstants = DEFAULT_CONSTANTS
) -> SimConstants:
    """Override `base` with `values` (e.g. a refitted YAML); unknown keys or non-positive
    numbers raise `IpuTuneError`."""
    known = {f.name for f in fields(SimConstants)}
    out: dict[str, float] = {}
    for key, value in values.items():
        if key not in known:
            # Its value is not shown: a file named by a stored study may be any YAML of the
            # reader's (a credentials file), and its values are none of the study's business.
            raise IpuTuneError(f"constants.{key_name(key)}: unknown constant (its value not "
                               "shown); known: " + ", ".join(sorted(known)))
        try:
            if isinstance(value, bool):  # YAML's true is no constant
                raise TypeError
            number = float(value)
        except (TypeError, ValueError):
            raise bad_value(f"constants.{key}", value, "must be a number") from None
        if not number > 0.0 or number != number or number == float("inf"):
            raise bad_value(f"constants.{key}", value, "must be a positive finite number")
        low, high = _constant_range(key)
        if not low <= number <= high:
            raise bad_value(f"constants.{key}", value,
                            f"must be in {bound_text(low)}..{bound_text(high)}")
        out[key] = number
    if not out and values:
        raise IpuTuneError("constants: nothing to apply")
    return replace(base, **out)
