"""One weight-update step of the best plan as an execution trace (a Gantt of stages x time).

The simulator reports per-stage times for one micro-batch (`SimResult.stages`) and per-step
totals by phase (`SimResult.phases`); this module lays them out in time the way PopVision's
execution trace shows a pipelined run, so that the ramp, the longest stage and the host time are
visible at a glance. It is a stylised schedule, not a second simulator: the lanes add up the
simulator's own numbers.

Schedules (seed memory/performance guide, section 4.2; seed pipelining tutorial):
- pipelined (`grouped`, `interleaved`): micro-batch m runs the forward of stage s in pipeline
  cycle m + s and its backward in cycle m + 2N - 1 - s, so the first stage keeps the longest
  activation FIFO and "2N stages are always under-utilised during the ramp up and ramp down".
  Cycles end on a sync (BSP), so a cycle lasts as long as its busiest IPU.
  `grouped` runs every forward of a cycle, then every backward; a ramp cycle only lasts as long
  as the work present. `interleaved` alternates backward and forward on each IPU and "a backward
  pass ... is always executed at every stage", so every cycle costs the full forward+backward
  slot, ramp included (why grouped "is generally faster").
- `sharded` (`poptorch.ShardedExecution`): one stage at a time, one micro-batch at a time.
Inference has forwards only; a step is the micro-batches of one device-iterations call.
Host time the simulator could not hide (host I/O, preprocessing, per-call overhead) comes first
on a host lane, as a StreamCopy before the model code in the seed's Fig. 4.6; the weight update,
gradient all-reduce and streaming-memory traffic come last on every IPU lane.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._result import SimResult, StageTime

__all__ = ["SEGMENT_KINDS", "Segment", "Timeline", "build_timeline"]

# Kinds of segment, in legend order, with the phase of SimResult.phases they come from (if any).
SEGMENT_KINDS = (
    "forward",
    "backward",
    "recompute",
    "inter_ipu",
    "all_reduce",
    "streaming_memory",
    "weight_update",
    "host_preprocess",
    "host_io",
    "host_overhead",
)
_HOST_PHASES = ("host_overhead", "host_preprocess", "host_io")
_TAIL_PHASES = ("all_reduce", "streaming_memory", "weight_update")
HOST_LANE = "Host"


@dataclass(frozen=True)
class Segment:
    lane: str  # "Host" or "IPU<i>"
    kind: str  # one of SEGMENT_KINDS
    start_s: float
    duration_s: float
    micro_batch: int = -1  # -1 for per-step work (weight update, host I/O)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


@dataclass(frozen=True)
class Timeline:
    schedule: str
    lanes: tuple[str, ...]  # "Host" first, then one lane per pipeline stage
    segments: tuple[Segment, ...]
    micro_batches_shown: int
    micro_batches_per_step: int
    ramp_up_s: tuple[float, float]  # (start, end); equal ends when there is no ramp
    ramp_down_s: tuple[float, float]
    total_s: float  # end of the last segment


def _lane(stage: int) -> str:
    return f"IPU{stage}"


def _micro_batches(plan: ExecutionPlan) -> int:
    # Train: one weight update consumes `gradient_accumulation` micro-batches per replica.
    # Infer: one call streams `device_iterations` micro-batches through the pipeline.
    return max(1, plan.gradient_accumulation if plan.training else plan.device_iterations)


def _pipelined(
    stages: tuple[StageTime, ...], n: int, training: bool, interleaved: bool, t0: float
) -> tuple[list[Segment], float, tuple[float, float], tuple[float, float]]:
    """Synchronous pipeline cycles; returns segments, end time and the two ramp windows."""
    depth = len(stages)
    # Virtual stages: forwards 0..N-1, then (training) backwards N-1..0 (seed tutorial figure).
    virtual = 2 * depth if training else depth
    cycles = n + virtual - 1
    slot = max(s.forward_s + s.inter_ipu_s + s.recompute_s + s.backward_s for s in stages)
    segments: list[Segment] = []
    cycle_starts: list[float] = []
    t = t0
    for c in range(cycles):
        cycle_starts.append(t)
        busiest = 0.0
        for s, st in enumerate(stages):
            fwd_mb = c - s
            bwd_mb = c - (virtual - 1 - s)
            has_f = 0 <= fwd_mb < n
            has_b = training and 0 <= bwd_mb < n
            work: list[tuple[str, float, int]] = []
            f_part = [("forward", st.forward_s, fwd_mb), ("inter_ipu", st.inter_ipu_s, fwd_mb)]
            b_part = [("recompute", st.recompute_s, bwd_mb), ("backward", st.backward_s, bwd_mb)]
            if interleaved:
                # Backward of the older micro-batch first, then the new forward: F and B alternate.
                work = (b_part if has_b else []) + (f_part if has_f else [])
            else:
                work = (f_part if has_f else []) + (b_part if has_b else [])
            x = t
            for kind, dur, mb in work:
                if dur > 0:
                    segments.append(Segment(_lane(s), kind, x, dur, mb))
                    x += dur
            busiest = max(busiest, x - t)
        t += slot if interleaved else busiest
    cycle_starts.append(t)
    # Cycles where some virtual stage idles: the first `virtual - 1` and the last `virtual - 1`.
    up_end = min(virtual - 1, n)
    down_start = max(n, up_end)
    ramp_up = (cycle_starts[0], cycle_starts[up_end])
    ramp_down = (cycle_starts[down_start], cycle_starts[cycles])
    return segments, t, ramp_up, ramp_down


def _sharded(
    stages: tuple[StageTime, ...], n: int, training: bool, t0: float
) -> tuple[list[Segment], float]:
    """One stage at a time (seed pipelining tutorial, "Sharded execution (sequential)")."""
    segments: list[Segment] = []
    t = t0
    for mb in range(n):
        for s, st in enumerate(stages):
            for kind, dur in (("forward", st.forward_s), ("inter_ipu", st.inter_ipu_s)):
                if dur > 0:
                    segments.append(Segment(_lane(s), kind, t, dur, mb))
                    t += dur
        if training:
            for s in reversed(range(len(stages))):
                st = stages[s]
                for kind, dur in (("recompute", st.recompute_s), ("backward", st.backward_s)):
                    if dur > 0:
                        segments.append(Segment(_lane(s), kind, t, dur, mb))
                        t += dur
    return segments, t


def build_timeline(
    result: SimResult, plan: ExecutionPlan, *, max_micro_batches: int = 64
) -> Timeline:
    """Lay out one step of `result` (simulated for `plan`) as lanes of timed segments.

    At most `max_micro_batches` micro-batches are drawn; when the step has more, the ramps are
    kept and the repeated steady state in between is left out (the Timeline says how many).
    """
    assert max_micro_batches >= 1
    stages = tuple(result.stages)
    lanes = (HOST_LANE, *(_lane(s) for s in range(len(stages))))
    per_step = _micro_batches(plan)
    n = min(per_step, max_micro_batches)
    segments: list[Segment] = []

    t = 0.0
    for phase in _HOST_PHASES:
        dur = float(result.phases.get(phase, 0.0))
        if dur > 0:
            segments.append(Segment(HOST_LANE, phase, t, dur))
            t += dur
    device_start = t

    ramp_up = ramp_down = (device_start, device_start)
    if stages:
        if plan.schedule == "sharded" or len(stages) == 1:
            body, t = _sharded(stages, n, plan.training, device_start)
        else:
            interleaved = plan.schedule == "interleaved"
            body, t, ramp_up, ramp_down = _pipelined(
                stages, n, plan.training, interleaved, device_start
            )
        segments.extend(body)

    if plan.training:
        for phase in _TAIL_PHASES:
            dur = float(result.phases.get(phase, 0.0))
            if dur > 0:
                for s in range(len(stages)):
                    segments.append(Segment(_lane(s), phase, t, dur))
                t += dur

    total = max((seg.end_s for seg in segments), default=0.0)
    return Timeline(
        schedule=plan.schedule if len(stages) > 1 else "single stage",
        lanes=lanes,
        segments=tuple(segments),
        micro_batches_shown=n,
        micro_batches_per_step=per_step,
        ramp_up_s=ramp_up,
        ramp_down_s=ramp_down,
        total_s=total,
    )
