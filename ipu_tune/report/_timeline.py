"""One weight-update step of the best plan as an execution trace (a Gantt of stages x time).

The simulator reports per-stage times for one micro-batch (`SimResult.stages`) and per-step
totals by phase (`SimResult.phases`); this module lays them out in time the way PopVision's
execution trace shows a pipelined run, so that the ramp, the longest stage and the host time are
visible at a glance. It is a stylised schedule, not a second simulator: the lanes add up the
simulator's own numbers.

Schedules (seed guide 4.2; Graphcore's PopTorch pipelining tutorial), with slot
lengths as the simulator's pipeline model (`ipu_tune.simulator._pipeline`) counts them, so the
trace adds up to the simulated step:
- pipelined (`grouped`, `interleaved`): micro-batch m runs the forward of stage s in slot
  m + s and its backward in slot m + 2(N-1) - s, so the first stage keeps the longest
  activation FIFO and "2N stages are always under-utilised during the ramp up and ramp down".
  Slots end on a sync (BSP): a full slot lasts as long as the longest stage, a ramp slot as
  long as the longest pass present. `grouped` runs each IPU's forward then its backward;
  `interleaved` runs a forward phase then a backward phase on every IPU in every slot, ramp
  included ("a backward pass ... is always executed at every stage"), which is why grouped
  "is generally faster".
- `sharded` (`poptorch.ShardedExecution`): one stage at a time, one micro-batch at a time.
Inference has forwards only, and its trace spans one call (`device_iterations` micro-batches),
since the pipeline fills once per call.
Host time the simulator could not hide (host I/O, preprocessing, per-call overhead) comes first
on a host lane, as a StreamCopy before the model code in the seed's Fig. 4.6; the weight update,
gradient all-reduce and streaming-memory traffic come last on every IPU lane.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import SimResult, StageTime

__all__ = ["SEGMENT_KINDS", "Segment", "Timeline", "build_timeline"]

# Kinds of segment in legend order; the last seven are SimResult.phases drawn as they are.
SEGMENT_KINDS = (
    "forward",
    "backward",
    "recompute",
    "exchange",
    "inter_ipu",
    "all_reduce_pod",
    "all_reduce_gw",
    "streaming_memory",
    "weight_update",
    "host_preprocess",
    "host_io",
    "host_overhead",
)
_HOST_PHASES = ("host_overhead", "host_preprocess", "host_io")
_TAIL_PHASES = ("all_reduce_pod", "all_reduce_gw", "streaming_memory", "weight_update")
HOST_LANE = "Host"
_Part = tuple[str, float]  # (segment kind, seconds)


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
    # Simulated steps the trace spans: 1 weight update (train); one call of `device_iterations`
    # micro-batches (infer, where a step is one micro-batch and the ramp is paid per call).
    steps: int = 1


def _lane(stage: int) -> str:
    return f"IPU{stage}"


def _micro_batches(plan: ExecutionPlan) -> int:
    # Train: one weight update consumes `gradient_accumulation` micro-batches per replica.
    # Infer: one call streams `device_iterations` micro-batches through the pipeline.
    per_step = plan.gradient_accumulation if plan.training else plan.device_iterations
    return max(1, per_step)


def _stage_parts(st: StageTime, training: bool,
                 exchange_share: float = 0.0) -> tuple[list[_Part], list[_Part]]:
    """(forward parts, backward parts) of one micro-batch on one stage.

    `inter_ipu_s` holds both IPU-Link copies of a training micro-batch: activations forward
    and gradients back (`inter_ipu_back_s`; half each for a result that does not report it);
    inference only sends forward.
    Each pass's on-chip exchange is drawn after its compute, as the step's exchange share of
    compute + exchange (`SimResult.phases`; a stage's own split is not reported).
    """
    back = (st.inter_ipu_s / 2 if st.inter_ipu_back_s is None else st.inter_ipu_back_s)
    back = back if training else 0.0
    link = st.inter_ipu_s - back
    x = exchange_share
    fwd = [("forward", st.forward_s * (1 - x)), ("exchange", st.forward_s * x),
           ("inter_ipu", link)]
    bwd = [("recompute", st.recompute_s), ("backward", st.backward_s * (1 - x)),
           ("exchange", st.backward_s * x), ("inter_ipu", back)]
    return fwd, (bwd if training else [])


def _total(parts: list[_Part]) -> float:
    return sum(d for _, d in parts)


def _pipelined(
    stages: tuple[StageTime, ...], n: int, training: bool, interleaved: bool, t0: float,
    exchange_share: float = 0.0,
) -> tuple[list[Segment], float, tuple[float, float], tuple[float, float]]:
    """Synchronous pipeline slots; returns segments, end time and the two ramp windows.

    Slot lengths follow the simulator's pipeline model (`ipu_tune.simulator._pipeline`), so
    the trace adds up to its step: a ramp slot lasts as long as the longest pass present, a
    full slot as long as the longest stage, and an interleaved slot always holds a forward
    phase and a backward phase of the longest passes.
    """
    depth = len(stages)
    parts = [_stage_parts(st, training, exchange_share) for st in stages]
    f = [_total(fp) for fp, _ in parts]
    b = [_total(bp) for _, bp in parts]
    # Micro-batch m: forward of stage s in slot m + s; the last stage runs its backward right
    # after its forward, so the backward of stage s comes in slot m + 2(N-1) - s.
    delay = 2 * (depth - 1) if training else 0
    cycles = n + depth - 1 + (depth - 1 if training else 0)
    ramp = depth - 1
    segments: list[Segment] = []
    starts: list[float] = []
    t = t0
    for c in range(cycles):
        starts.append(t)
        if interleaved and training:
            length = max(f) + max(b)
        elif c < ramp:  # ramp-up: only the forwards of the first c + 1 stages
            length = max(f[: c + 1])
        elif training and c >= n + ramp:  # ramp-down: only the backwards of the first stages
            length = max(b[: n + delay - c])
        elif not training and c >= n:  # drain: only the forwards of the last stages
            length = max(f[c - n + 1:])
        else:
            length = max(fi + bi for fi, bi in zip(f, b, strict=True))
        for s, (fwd, bwd) in enumerate(parts):
            x = t
            if 0 <= c - s < n:
                for kind, dur in fwd:
                    if dur > 0:
                        segments.append(Segment(_lane(s), kind, x, dur, c - s))
                        x += dur
            mb = c - (delay - s)
            if training and 0 <= mb < n:
                # Interleaved: every IPU syncs between the forward and the backward phase.
                x = t + max(f) if interleaved else x
                for kind, dur in bwd:
                    if dur > 0:
                        segments.append(Segment(_lane(s), kind, x, dur, mb))
                        x += dur
            assert x <= t + length + 1e-12
        t += length
    starts.append(t)
    up = (starts[0], starts[min(ramp, cycles)])
    down = (starts[max(cycles - ramp, 0)], starts[cycles]) if depth > 1 else (t, t)
    return segments, t, up, down


def _sharded(
    stages: tuple[StageTime, ...], n: int, training: bool, t0: float,
    exchange_share: float = 0.0,
) -> tuple[list[Segment], float]:
    """One stage at a time (Graphcore's PopTorch pipelining tutorial, "Sharded execution
    (sequential)")."""
    parts = [_stage_parts(st, training, exchange_share) for st in stages]
    order = [(s, fwd) for s, (fwd, _) in enumerate(parts)]
    if training:
        order += [(s, parts[s][1]) for s in reversed(range(len(stages)))]
    segments: list[Segment] = []
    t = t0
    for mb in range(n):
        for s, passes in order:
            for kind, dur in passes:
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

    # SimResult.phases are per step; an inference trace spans one call of many steps.
    steps = 1 if plan.training else plan.device_iterations
    t = 0.0
    for phase in _HOST_PHASES:
        dur = float(result.phases.get(phase, 0.0)) * steps
        if dur > 0:
            segments.append(Segment(HOST_LANE, phase, t, dur))
            t += dur
    device_start = t

    ramp_up = ramp_down = (device_start, device_start)
    comp, exch = (float(result.phases.get(p, 0.0)) for p in ("compute", "exchange"))
    share = exch / (comp + exch) if comp + exch > 0 else 0.0
    if stages:
        if plan.schedule == "sharded" or len(stages) == 1:
            body, t = _sharded(stages, n, plan.training, device_start, share)
        else:
            interleaved = plan.schedule == "interleaved"
            body, t, ramp_up, ramp_down = _pipelined(
                stages, n, plan.training, interleaved, device_start, share
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
        steps=steps,
    )
