"""Pieces shared by the framework exports: the "why" sentences quoting the simulated result.

Kept apart from the exports themselves so each file stays short. No sentence cites internal
notes: the reasons cite public Graphcore documentation (`_docs.cite`).
"""

from __future__ import annotations

from ipu_tune.knobs import rate_text
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES, SimResult, host_wait_clause

from ._docs import cite

__all__ = ["Facts"]

_MB = 1e6  # decimal megabytes, as the run summary and the report print them


class Facts:
    """Sentences about the simulated result for the comments; empty without a result."""

    def __init__(self, plan: ExecutionPlan, result: SimResult | None) -> None:
        self.plan = plan
        self.r = result

    def _ms(self, phase: str) -> float:
        assert self.r is not None
        if phase not in TIME_PHASES:  # a renamed phase must not read as 0 ms
            raise KeyError(f"{phase!r} is not a simulator time phase: {TIME_PHASES}")
        return float(self.r.phases.get(phase, 0.0)) * 1e3

    def summary(self) -> str:
        r = self.r
        if r is None:
            return "No simulated result was given, so the comments give no figures."
        if not r.memory:
            return f"Simulated: fits={r.fits}, {rate_text(r.throughput)}."
        full = max(r.memory, key=lambda m: m.total_bytes)
        state = "fits" if r.fits else f"DOES NOT FIT ({r.reason})"
        return (
            f"Simulated: {rate_text(r.throughput)}, step {r.step_time_s * 1e3:.2f} ms,"
            f" bottleneck {r.bottleneck}; {state}; peak {full.total_bytes / _MB:.0f} MB of"
            f" {full.limit_bytes / _MB:.0f} MB on IPU{full.ipu}."
        )

    def phase_sentence(self, phase: str) -> str:
        if self.r is None:
            return ""
        # A host-bound plan: the host_preprocess phase is only the device's wait, so the
        # sentence quotes the host's whole work against the device's, as `evaluate` does.
        waits = host_wait_clause(self.r) if phase == "host_preprocess" else ""
        if waits:
            return (f"Simulated bottleneck host_preprocess: {waits} (step"
                    f" {self.r.step_time_s * 1e3:.2f} ms).")
        ms = self._ms(phase)
        step = self.r.step_time_s * 1e3
        share = 100.0 * ms / step if step > 0 else 0.0
        tail = "; it is the bottleneck" if self.r.bottleneck == phase else ""
        return f"Simulated {phase}: {ms:.3f} ms of the {step:.2f} ms step ({share:.0f}%){tail}."

    def all_reduce_sentence(self) -> str:
        """The gradient all-reduce over IPU-Links inside a POD and over GW-Links between PODs."""
        if self.r is None:
            return ""
        pod, gw = self._ms("all_reduce_pod"), self._ms("all_reduce_gw")
        step = self.r.step_time_s * 1e3
        share = 100.0 * (pod + gw) / step if step > 0 else 0.0
        return (
            f"Simulated gradient all-reduce: {pod:.3f} ms inside the POD (IPU-Links) +"
            f" {gw:.3f} ms between PODs (GW-Links) of the {step:.2f} ms step ({share:.0f}%)."
        )

    def ga_sentence(self) -> str:
        if self.r is None:
            return ""
        return (
            f"Simulated pipeline ramp {self._ms('pipeline_ramp'):.3f} ms and weight update"
            f" {self._ms('weight_update'):.3f} ms per step."
        )

    def stage_balance(self) -> str:
        if self.r is None or not self.r.stages:
            return ""
        times = ", ".join(
            f"{(s.forward_s + s.backward_s + s.recompute_s) * 1e3:.2f}" for s in self.r.stages
        )
        ipu0 = (f" (IPU0's with the tied head's stage, `{self.r.stages[0].also[0]}`)"
                if self.r.stages[0].also else "")
        return (f"Simulated ms per micro-batch by IPU: {times}{ipu0} (the longest bounds the"
                " step).")

    def headroom_sentence(self) -> str:
        if self.r is None or not self.r.memory:
            return ""
        room = min(self.r.memory, key=lambda m: m.limit_bytes - m.total_bytes)
        left = (room.limit_bytes - room.total_bytes) / _MB
        return f"Simulated headroom: {left:.0f} MB on the fullest IPU (IPU{room.ipu})."

    def category_sentence(self, category: str) -> str:
        if category not in MEMORY_CATEGORIES:  # a renamed category must not read as 0 MB
            raise KeyError(f"{category!r} is not a simulator memory category")
        if self.r is None or not self.r.memory:
            return ""
        top = max(self.r.memory, key=lambda m: m.categories.get(category, 0))
        mb = top.categories.get(category, 0) / _MB
        return f"Simulated {category}: {mb:.1f} MB on IPU{top.ipu}."

    def why_sharded(self) -> str:
        return "only one IPU works at a time, so throughput is low; " + (
            self.headroom_sentence() or "chosen for memory, or for debugging."
        )

    def recompute_sentence(self) -> str:
        if self.r is None:
            return ""
        extra = sum(s.recompute_s for s in self.r.stages) * 1e3
        return f"Simulated recompute: {extra:.3f} ms per micro-batch over all stages. " + (
            self.category_sentence("recompute_checkpoints")
        )

    def offload_sentence(self, on: bool) -> str:
        if self.r is None:
            return ""
        if on:
            return "Frees the optimizer state from IPU memory. " + self.phase_sentence(
                "streaming_memory"
            )
        return "Kept on chip, no streaming traffic. " + self.category_sentence("optimizer_state")

    def rts_sentence(self, plan: ExecutionPlan) -> str:
        if plan.replicated_tensor_sharding:
            return (
                f"Optimizer state split across the {plan.replication_factor} replicas"
                f" ({cite('rts')}). " + self.category_sentence("optimizer_state")
            )
        if plan.replication_factor == 1:
            return "Needs replication; this plan has one replica."
        return "Every replica keeps the whole optimizer state. " + self.headroom_sentence()

    def io_sentence(self, eight_bit: bool, tokens: bool = False) -> str:
        """What the host sends per input element: token ids are int32 whatever the precision."""
        size = ("4 bytes" if tokens else "1 byte" if eight_bit
                else "2 bytes" if self.plan.input_fp16 else "4 bytes")
        base = f"The host sends {size} per input element ({cite('eight_bit')}). "
        if eight_bit:
            base = (
                "Sends 1 byte per pixel instead of 2 (fp16) or 4 (fp32) and moves"
                " normalisation onto the IPU. "
            )
        return base + self.phase_sentence("host_io")
