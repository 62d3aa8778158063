"""The frozen result of one simulation: fits, throughput, and why (PopVision-like breakdowns)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["MEMORY_CATEGORIES", "TIME_PHASES", "IpuMemory", "SimResult", "StageTime", "built",
           "fullest", "host_wait_clause"]

T = TypeVar("T")

# Memory categories per IPU, as PopVision's memory report groups them.
MEMORY_CATEGORIES = (
    "code",  # vertex + control code
    "exchange_code",  # internal, host and global exchange code (grows with replicas)
    "weights",
    "gradients",  # gradient accumulators
    "optimizer_state",
    "activation_stash",  # pipeline FIFOs of activations kept for backward
    "recompute_checkpoints",
    "activations",  # live activations of the micro-batch in flight
    "temporaries",  # conv/matmul scratch, bounded by available memory proportion
    "stream_buffers",  # host I/O buffers (prefetch depth)
    "io_tiles",  # memory of tiles reserved for I/O
)

# Phases of one weight-update step (seconds), as an execution trace would show them.
TIME_PHASES = (
    "compute",
    "exchange",  # on-chip exchange and syncs
    "inter_ipu",  # activations/gradients across IPU-Links
    "pipeline_ramp",  # ramp-up/down: stages under-used
    "weight_update",
    "all_reduce_pod",  # gradient reduction across replicas over IPU-Links, inside each POD
    "all_reduce_gw",  # the same across PODs over GW-Links
    "streaming_memory",  # offloaded optimizer state traffic
    "host_io",  # host-to-IPU transfer not hidden by I/O tiles/prefetch
    "host_preprocess",  # host data pipeline time not overlapped with the device
    "host_overhead",  # per-call round trip amortised over device iterations
)


@dataclass(frozen=True)
class IpuMemory:
    ipu: int
    stage: int
    categories: Mapping[str, int]  # bytes by MEMORY_CATEGORIES
    limit_bytes: int  # SRAM of the IPU
    max_tile_bytes: int  # most loaded tile
    tile_limit_bytes: int  # SRAM of one tile

    @property
    def total_bytes(self) -> int:
        return int(sum(self.categories.values()))

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.limit_bytes and self.max_tile_bytes <= self.tile_limit_bytes

    @property
    def fullness(self) -> float:
        """The larger of the IPU's total and its fullest tile over their limits (> 1: does not
        fit); 0.0 for limits of 0 (an unreadable stored result)."""
        if self.limit_bytes <= 0 or self.tile_limit_bytes <= 0:
            return 0.0
        return max(self.total_bytes / self.limit_bytes, self.max_tile_bytes / self.tile_limit_bytes)


def fullest(memory: Iterable[IpuMemory]) -> IpuMemory | None:
    """The IPU a plan that does not fit is said of (None when every IPU fits): the one furthest
    over the IPU's SRAM in bytes, the figure a no-fit headline gives as the peak and its excess,
    so the IPU named and the peak are one; among IPUs over only by a tile, the one whose tile is
    furthest over. Every reader that names "the fullest IPU" goes by this one rule."""
    over = [m for m in memory if not m.fits]
    return max(over, key=lambda m: (max(0, m.total_bytes - m.limit_bytes), m.fullness),
               default=None)


@dataclass(frozen=True)
class StageTime:
    """Device time of one pipeline stage for one micro-batch (seconds)."""

    stage: int
    blocks: tuple[str, ...]  # first and last block names of the stage
    forward_s: float
    backward_s: float
    recompute_s: float
    inter_ipu_s: float  # both IPU-Link copies: activations forward and gradients back
    # The gradient copy back alone (None: not reported, e.g. a result stored before it was).
    inter_ipu_back_s: float | None = None
    # Blocks it runs besides its own range: the tied masked-LM head on the first stage.
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimResult:
    fits: bool
    throughput: float  # samples/s of the whole system; 0.0 when it does not fit
    step_time_s: float  # one weight update (train) or one micro-batch pass (infer), all phases
    phases: Mapping[str, float]  # seconds per step by TIME_PHASES
    bottleneck: str  # the phase that bounds the step, by name
    memory: tuple[IpuMemory, ...]  # one entry per IPU of one replica
    stages: tuple[StageTime, ...]
    reason: str = ""  # why it does not fit: IPU, category and excess
    samples_per_step: float = 0.0  # dataset samples per step (sequences, when packed)
    # Throughput without the host's data pipeline (the device call: its passes, its stream
    # copies and its per-call cost), samples/s.
    device_throughput: float = 0.0
    extras: Mapping[str, Any] = field(default_factory=dict)
    # Seconds from a call's inputs on the host to its results on the host (device iterations
    # x micro-batch samples): per-call cost, stream copies and device passes, see `_simulate`.
    latency_s: float = 0.0

    @property
    def memory_per_ipu(self) -> list[int]:
        return [m.total_bytes for m in self.memory]

    @property
    def memory_limit_bytes(self) -> int:
        return self.memory[0].limit_bytes if self.memory else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "throughput": self.throughput,
            "memory_per_ipu": self.memory_per_ipu,
            "memory_limit_bytes": self.memory_limit_bytes,
            "reason": self.reason,
            "bottleneck": self.bottleneck,
            "step_time_s": self.step_time_s,
            "samples_per_step": self.samples_per_step,
            "device_throughput": self.device_throughput,
            "latency_s": self.latency_s,
            "phases": dict(self.phases),
            "memory": [
                {
                    "ipu": m.ipu,
                    "stage": m.stage,
                    "total_bytes": m.total_bytes,
                    "limit_bytes": m.limit_bytes,
                    "max_tile_bytes": m.max_tile_bytes,
                    "tile_limit_bytes": m.tile_limit_bytes,
                    "categories": dict(m.categories),
                }
                for m in self.memory
            ],
            "stages": [
                {
                    "stage": s.stage,
                    "blocks": list(s.blocks),
                    "forward_s": s.forward_s,
                    "backward_s": s.backward_s,
                    "recompute_s": s.recompute_s,
                    "inter_ipu_s": s.inter_ipu_s,
                    "inter_ipu_back_s": s.inter_ipu_back_s,
                    "also": list(s.also),
                }
                for s in self.stages
            ],
            "extras": dict(self.extras),
        }


def host_wait_clause(result: SimResult) -> str:
    """Why the host's data pipeline bounds a plan whose `host_preprocess` phase is not the
    largest ("" for any other plan): the asynchronous loader overlaps the host's work with the
    device, so the phase is only the device's wait, and the figures that explain the bottleneck
    are the host's whole work a step against the device's. One wording for `evaluate`'s step
    line and the exports' comments, so that they quote the same figures."""
    phases = result.phases
    if result.bottleneck != "host_preprocess" or phases["host_preprocess"] >= max(
            phases.values()):
        return ""
    steps = float(result.extras["samples_per_call"]) / result.samples_per_step  # a call's steps
    host_ms, device_ms = (1e3 * float(result.extras[k]) / steps
                          for k in ("host_call_s", "device_call_s"))
    return (f"the asynchronous loader's host work takes {host_ms:,.2f} ms a step, the "
            f"device's {device_ms:,.2f} ms: the device waits for its data, so a faster device "
            "phase raises no throughput")


def built(cls: type[T], values: dict[str, Any]) -> T:
    """An instance of the frozen dataclass `cls` with every field given in `values`, built
    without its generated `__init__`, which sets each field through `object.__setattr__` (about
    half the cost of a result on the cached path). The instance is the one `cls(**values)`
    makes: same fields, equality, hash and pickling (tests/simulator/test_speed_paths.py)."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj
