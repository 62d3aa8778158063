"""Pipeline schedule: device time of one weight-update step from per-stage times.

Sources: seed guide 4.2 (the longest stage bounds the pipeline; 2N stages are under-used during
ramp-up and ramp-down, amortised when gradient accumulation >> stages; grouped is faster than
interleaved, which runs a backward at every stage of every slot), the pipelining tutorial
(sharded execution runs one stage at a time; the pipeline fills stage by stage).

Pipeline slots are synchronous across IPUs (each ends with the inter-IPU copies), so:
- grouped, G micro-batches: G slots of the longest stage (forward + backward + recompute +
  its IPU-Link copies), plus a ramp-up of N-1 slots where only the forward of the first stages
  run and a ramp-down of N-1 slots where only their backward runs: ramp =
  sum_k max_{j<=k} F_j + sum_k max_{j<=k} B_j, k = 0..N-2 (at most (N-1) full slots).
- interleaved: G + 2(N-1) slots, each a forward phase and a backward phase on every IPU:
  slot = max_s F_s + max_s B_s.
- sharded: every micro-batch runs the stages one after another: G x sum_s (F_s + B_s).
- inference: forward only; the pipeline fills and drains once per call (amortised by device
  iterations): G + N-1 slots, slot k of the fill running stages 0..k, of the drain k..N-1.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StageParts", "StepCore", "pipeline_step", "stage_parts"]


# The per-simulate records below are slotted dataclasses, not frozen: built and read on the
# hot path, where a frozen dataclass's constructor costs several times more and a NamedTuple's
# fields read several times slower. Nothing changes them once built.
@dataclass(slots=True)
class StageParts:
    """Seconds of one micro-batch on one stage, by kind. Build it with `stage_parts`, which
    sums the passes once: the schedule reads them several times."""

    f_compute: float
    f_exchange: float
    f_link: float  # activations sent to the next stage
    b_compute: float
    b_exchange: float
    b_link: float  # gradients sent to the previous stage
    r_compute: float  # recomputed forward
    r_exchange: float
    forward: float  # f_compute + f_exchange + f_link
    backward: float  # b_compute + b_exchange + b_link + r_compute + r_exchange

    @property
    def slot(self) -> float:
        return self.forward + self.backward


def stage_parts(f_compute: float, f_exchange: float, f_link: float, b_compute: float = 0.0,
                b_exchange: float = 0.0, b_link: float = 0.0, r_compute: float = 0.0,
                r_exchange: float = 0.0) -> StageParts:
    return StageParts(f_compute, f_exchange, f_link, b_compute, b_exchange, b_link, r_compute,
                      r_exchange, f_compute + f_exchange + f_link,
                      b_compute + b_exchange + b_link + r_compute + r_exchange)


@dataclass(slots=True)
class StepCore:
    """Device seconds per step of the pipelined passes, split by phase."""

    compute: float
    exchange: float
    inter_ipu: float
    ramp: float  # per step (train) or per call (infer)
    slot: float  # steady time per micro-batch (hides an overlapped stream copy)

    @property
    def total(self) -> float:
        return self.compute + self.exchange + self.inter_ipu + self.ramp


def _split(parts: list[tuple[StageParts, str]]) -> tuple[float, float, float]:
    """(compute, exchange, link) of forward ('f'), backward ('b') or both ('fb') passes."""
    comp = exch = link = 0.0
    for p, which in parts:
        if "f" in which:
            comp += p.f_compute
            exch += p.f_exchange
            link += p.f_link
        if "b" in which:
            comp += p.b_compute + p.r_compute
            exch += p.b_exchange + p.r_exchange
            link += p.b_link
    return comp, exch, link


def pipeline_step(
    stages: list[StageParts], schedule: str, micro_batches: int, training: bool,
    head_stages: int = 0,
) -> StepCore:
    """`head_stages`: a tied head's own stage after the last, on IPU0 (`head_stage_count`):
    its passes are in the first stage's parts (the same IPU, so the steady slot is unchanged).
    Training turns round at it, so a step's ramp has one more fill and one more drain slot.
    Inference only adds the pipeline's last cycle, where the head alone runs: its work is
    already in IPU0's slots (G + N cycles, the cycles with every other stage busy as before),
    so the ramp is unchanged."""
    n = len(stages)
    g = float(micro_batches)
    if not training:
        if schedule == "sharded" or n == 1:
            comp, exch, link = _split([(p, "f") for p in stages])
            return StepCore(g * comp, g * exch, g * link, 0.0, comp + exch + link)
        bottleneck = max(stages, key=lambda p: p.forward)
        comp, exch, link = _split([(bottleneck, "f")])
        # Fill: slot k runs stages 0..k; drain: slot k runs stages k..N-1. The 2(N-1) partial
        # slots stand in for N-1 of the G full slots counted above (G + N-1 slots in all).
        f = [p.forward for p in stages]
        fill = sum(max(f[: k + 1]) for k in range(n - 1))
        drain = sum(max(f[k:]) for k in range(1, n))
        ramp = fill + drain - (n - 1) * bottleneck.forward
        return StepCore(g * comp, g * exch, g * link, ramp, bottleneck.forward)
    if schedule == "sharded" or n == 1:
        comp, exch, link = _split([(p, "fb") for p in stages])
        return StepCore(g * comp, g * exch, g * link, 0.0, comp + exch + link)
    if schedule == "interleaved":
        f_max = max(stages, key=lambda p: p.forward)
        b_max = max(stages, key=lambda p: p.backward)
        comp, exch, link = _split([(f_max, "f"), (b_max, "b")])
        slot = f_max.forward + b_max.backward
        return StepCore(g * comp, g * exch, g * link, 2.0 * (n - 1 + head_stages) * slot, slot)
    slots = [p.forward + p.backward for p in stages]  # StageParts.slot
    worst = stages[max(range(n), key=slots.__getitem__)]  # the first longest, as max() picks
    # _split([(worst, "fb")]), written out: the common case of every tuner trial.
    comp = worst.f_compute + (worst.b_compute + worst.r_compute)
    exch = worst.f_exchange + (worst.b_exchange + worst.r_exchange)
    link = worst.f_link + worst.b_link
    ramp = 0.0
    f_run = b_run = 0.0
    for p in stages[: n - 1 + head_stages]:
        f_run = max(f_run, p.forward)
        b_run = max(b_run, p.backward)
        ramp += f_run + b_run
    return StepCore(g * comp, g * exch, g * link, ramp, worst.forward + worst.backward)
