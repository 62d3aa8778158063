"""The pipeline schedules each framework can run, declared once, and the header line of a
program that holds another plan than the study's best because its framework cannot run the
best plan's schedule.

ipu-tune simulates three schedules (Memory and Performance Optimisation on the IPU, 4.2
"Pipeline execution scheme"): `grouped`, `interleaved` (N+1 stashed activations per stage) and
`sharded` (one stage at a time). What each framework's public API can express:

* PopTorch: `poptorch.PipelinedExecution` (grouped) and `poptorch.ShardedExecution`
  (python/options.py L806, L924); its phased strategies are no pipeline, and it has no
  interleaved schedule.
* PopART: `SessionOptions.enablePipelining` True (grouped) or False with manual virtual graphs
  (sharded); `executionPhaseSettings.schedule = Interleaving` orders execution phases, not a
  pipeline (sessionoptions.hpp L491).
* TensorFlow 2: `ipu.pipelining_ops.PipelineSchedule.Grouped`, `.Interleaved`, `.Sequential`
  (ops/pipelining_ops.py L51); Sequential runs one stage at a time.
* optimum-graphcore 0.7.1 runs PopTorch and picks the strategy itself
  (optimum/graphcore/ipu_configuration.py L615-619): `PipelinedExecution` to train,
  `ShardedExecution` for inference; `ipu_config.json` has no field for it.
* best.yaml is ipu-tune's own config (any schedule); the PopRun line launches whichever program
  runs the plan (`_poprun`), so neither declares a restriction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ipu_tune.knobs import rate_text
from ipu_tune.plan import ExecutionPlan

__all__ = ["OPTIMUM", "POPART", "POPTORCH", "TENSORFLOW", "Schedules", "StandIn"]


@dataclass(frozen=True)
class Schedules:
    """The pipeline schedules a framework can run: ipu-tune's name -> the framework's own, in
    order of preference (the first is the one a plan is switched to)."""

    framework: str  # as a program's header names it
    train: Mapping[str, str]
    infer: Mapping[str, str] | None = None  # None: as in training

    def names(self, training: bool) -> Mapping[str, str]:
        return self.train if training or self.infer is None else self.infer

    def runs(self, plan: ExecutionPlan) -> bool:
        """One stage has no pipeline: the simulator times every schedule of it alike."""
        return plan.stages == 1 or plan.schedule in self.names(plan.training)

    def switch(self, plan: ExecutionPlan) -> str:
        """The schedule a plan this framework cannot run is switched to."""
        return next(iter(self.names(plan.training)))

    def cannot(self, schedule: str, training: bool) -> str:
        when = "" if self.infer is None else (" to train" if training else " for inference")
        return f"uses the {schedule} schedule, which {self.framework} cannot run{when}"


POPTORCH = Schedules("PopTorch", {"grouped": "PipelinedExecution", "sharded": "ShardedExecution"})
POPART = Schedules("PopART", {"grouped": "enablePipelining = True",
                              "sharded": "enablePipelining = False"})
TENSORFLOW = Schedules("TensorFlow", {"grouped": "Grouped", "interleaved": "Interleaved",
                                      "sharded": "Sequential"})
OPTIMUM = Schedules("optimum-graphcore", {"grouped": "PipelinedExecution"},
                    {"sharded": "ShardedExecution"})


@dataclass(frozen=True)
class StandIn:
    """Why a program holds this plan and not the study's best: the best's figures, and this
    plan's (a stored trial, or the best plan with its schedule switched when none fits)."""

    best_trial: int | None
    best_throughput: float  # samples/s
    best_schedule: str
    training: bool
    trial: int | None  # None: the best plan with `schedule`, simulated for the exports
    throughput: float  # samples/s of this plan
    schedule: str
    fits: bool
    reason: str = ""  # why it does not fit

    def line(self, schedules: Schedules) -> str:
        """The program header's one sentence about it (`schedules`: the program's framework)."""
        fw = schedules.framework
        trial = f"trial {self.best_trial}, " if self.best_trial is not None else ""
        head = (f"The study's best plan ({trial}{rate_text(self.best_throughput)})"
                f" {schedules.cannot(self.best_schedule, self.training)}")
        share = (f" ({100 * self.throughput / self.best_throughput:.1f}% of the best plan's)"
                 if self.best_throughput > 0 else "")
        if self.trial is not None:
            return (f"{head}; this program is the best plan {fw} can run: trial {self.trial},"
                    f" {rate_text(self.throughput)}{share}.")
        if self.fits:
            return (f"{head}; no stored trial {fw} can run fits, so this program is that plan"
                    f" with the {self.schedule} schedule, simulated at"
                    f" {rate_text(self.throughput)}{share}.")
        return (f"{head}; no plan {fw} can run fits: no stored trial, nor that plan with the"
                f" {self.schedule} schedule, which this program holds ({self.reason}).")
