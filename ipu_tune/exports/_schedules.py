"""What each framework can run, declared once (its pipeline schedules and its other rules, such
as TensorFlow's sharding of offloaded optimizer state only), and the header line of a program
that holds another plan than the study's best because its framework cannot run the best plan.

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

Other rules (`Rule`): TensorFlow shards only offloaded optimizer state (`TF_ON_CHIP_RTS`);
optimum-graphcore sets no recomputation but every layer's checkpoints (`OPTIMUM_RECOMPUTE`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ipu_tune.config import EvalConfig, at_pipeline_minimum
from ipu_tune.knobs import rate_text
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import recompute_mode

__all__ = ["OPTIMUM", "POPART", "POPTORCH", "TENSORFLOW", "Rule", "Schedules", "StandIn"]


@dataclass(frozen=True)
class Rule:
    """A setting a framework cannot run, besides a pipeline schedule: which plans break it,
    what the header says of such a plan, and the change that makes a plan the framework runs."""

    breaks: Callable[[ExecutionPlan], bool]
    uses: str  # "The study's best plan ... <uses>, which <framework> cannot run<why>"
    why: str
    fix: Callable[[EvalConfig], EvalConfig]
    fixed: str  # "that plan with <fixed>"


def _on_chip_rts(plan: ExecutionPlan) -> bool:
    """Optimizer state sharded across training replicas while it stays on chip."""
    return (plan.training and plan.replication_factor > 1 and plan.replicated_tensor_sharding
            and not plan.offload_optimizer_state)


def _offload_state(cfg: EvalConfig) -> EvalConfig:
    return replace(cfg, plan=replace(cfg.plan, offload_optimizer_state=True))


# TensorFlow's replicated_optimizer_state_sharding partitions offloaded optimizer state across
# replicas only (ops/pipelining_ops.py L410, optimizers/gradient_accumulation_optimizer.py
# L53-76): with offload_weight_update_variables=False every replica keeps the whole state, so a
# plan simulated with on-chip RTS would not fit as TensorFlow runs it. The fix keeps the
# sharding and offloads the state, as TensorFlow shards it. PopTorch and PopART shard on-chip
# state (TensorLocationSettings.useReplicatedTensorSharding with useOnChipStorage(True)).
TF_ON_CHIP_RTS = Rule(
    _on_chip_rts,
    "shards its on-chip optimizer state across replicas (replicated tensor sharding without"
    " offload)",
    " (its replicated_optimizer_state_sharding partitions offloaded optimizer state only)",
    _offload_state,
    "its optimizer state offloaded (and sharded)",
)


def _recompute_unset(plan: ExecutionPlan) -> bool:
    """A recomputation `ipu_config.json` cannot set: its one field,
    `recompute_checkpoint_every_layer`, gives `every_block` or PopTorch's own choice (`auto`:
    pipeline recomputation when pipelined, none otherwise), so a pipeline without recomputation
    or one stage with `checkpoints` runs otherwise under optimum-graphcore."""
    return plan.recompute != "every_block" and recompute_mode(plan) != recompute_mode(
        replace(plan, recompute="auto"))


def _auto_recompute(cfg: EvalConfig) -> EvalConfig:
    return replace(cfg, plan=replace(cfg.plan, recompute="auto"))


OPTIMUM_RECOMPUTE = Rule(
    _recompute_unset,
    "sets a recomputation of its own (plan.recompute)",
    " (IPUConfig's recompute_checkpoint_every_layer gives every layer's checkpoint or"
    " PopTorch's own choice, pipeline recomputation when pipelined)",
    _auto_recompute,
    "PopTorch's own recomputation (plan.recompute=auto)",
)


@dataclass(frozen=True)
class Schedules:
    """What a framework runs: its pipeline schedules, ipu-tune's name -> the framework's own, in
    order of preference (the first is the one a plan is switched to), and its other `rules`."""

    framework: str  # as a program's header names it
    train: Mapping[str, str]
    infer: Mapping[str, str] | None = None  # None: as in training
    rules: tuple[Rule, ...] = ()

    def names(self, training: bool) -> Mapping[str, str]:
        return self.train if training or self.infer is None else self.infer

    def runs_schedule(self, plan: ExecutionPlan) -> bool:
        """One stage has no pipeline: the simulator times every schedule of it alike."""
        return plan.stages == 1 or plan.schedule in self.names(plan.training)

    def broken(self, plan: ExecutionPlan) -> list[Rule]:
        """The framework's rules, besides its schedules, that the plan breaks."""
        return [r for r in self.rules if r.breaks(plan)]

    def runs(self, plan: ExecutionPlan) -> bool:
        return self.runs_schedule(plan) and not self.broken(plan)

    def switch(self, plan: ExecutionPlan) -> str:
        """The schedule a plan whose schedule this framework cannot run is switched to."""
        return next(iter(self.names(plan.training)))

    def _rescheduled(self, plan: ExecutionPlan) -> ExecutionPlan:
        return plan if self.runs_schedule(plan) else replace(plan, schedule=self.switch(plan))

    def switched(self, cfg: EvalConfig, plan: ExecutionPlan, head_stages: int = 0) -> EvalConfig:
        """`cfg` (whose plan is `plan`) changed into a plan this framework runs: its schedule,
        then the rules the rescheduled plan breaks, then gradient accumulation (inference:
        device iterations) raised to PopTorch's least for the new pipeline (`head_stages`: a
        tied head's stage on IPU0, `ipu_tune.case.head_stages`)."""
        if not self.runs_schedule(plan):
            cfg = replace(cfg, plan=replace(cfg.plan, pipeline=replace(
                cfg.plan.pipeline, schedule=self.switch(plan))))
        for rule in self.broken(self._rescheduled(plan)):
            cfg = rule.fix(cfg)
        return at_pipeline_minimum(copy.deepcopy(cfg), head_stages)

    def cannot(self, plan: ExecutionPlan) -> str:
        """Why the framework cannot run `plan`: "uses ..., which <framework> cannot run"."""
        when = "" if self.infer is None else (" to train" if plan.training else " for inference")
        out = ([] if self.runs_schedule(plan) else
               [f"uses the {plan.schedule} schedule, which {self.framework} cannot run{when}"])
        out += [f"{r.uses}, which {self.framework} cannot run{r.why}"
                for r in self.broken(self._rescheduled(plan))]
        return "; it ".join(out)

    def fixed(self, best: ExecutionPlan, plan: ExecutionPlan | None = None) -> str:
        """What the switched plan `plan` changes in `best`: "the grouped schedule", "its
        optimizer state ...", a raised gradient accumulation."""
        out = [] if self.runs_schedule(best) else [f"the {self.switch(best)} schedule"]
        out += [r.fixed for r in self.broken(self._rescheduled(best))]
        for name, key in (("gradient accumulation", "gradient_accumulation"),
                          ("device iterations", "device_iterations")):
            was, now = getattr(best, key), getattr(plan or best, key)
            if now != was:
                out.append(f"{name} {was} -> {now} (PopTorch's least for its pipeline)")
        return " and ".join(out)


POPTORCH = Schedules("PopTorch", {"grouped": "PipelinedExecution", "sharded": "ShardedExecution"})
POPART = Schedules("PopART", {"grouped": "enablePipelining = True",
                              "sharded": "enablePipelining = False"})
TENSORFLOW = Schedules("TensorFlow", {"grouped": "Grouped", "interleaved": "Interleaved",
                                      "sharded": "Sequential"}, rules=(TF_ON_CHIP_RTS,))
OPTIMUM = Schedules("optimum-graphcore", {"grouped": "PipelinedExecution"},
                    {"sharded": "ShardedExecution"}, rules=(OPTIMUM_RECOMPUTE,))


@dataclass(frozen=True)
class StandIn:
    """Why a program holds this plan and not the study's best: the best's plan and figures, and
    this plan's (a stored trial, or the best plan changed into one the framework runs when none
    fits). Shared by the frameworks rendering the same plan: `line` says it for one of them."""

    best_trial: int | None
    best_throughput: float  # samples/s
    best: ExecutionPlan
    trial: int | None  # None: the best plan changed (`Schedules.switched`), simulated once
    throughput: float  # samples/s of this plan
    fits: bool
    reason: str = ""  # why it does not fit
    # The best stored trial the framework runs (number, samples/s), when this changed plan
    # ranks above it by the study's objectives.
    over: tuple[int, float] | None = None
    broken: str = ""  # the study's constraints this changed plan, which fits, breaks
    plan: ExecutionPlan | None = None  # this plan (None: not given; a stored trial's)

    def line(self, schedules: Schedules) -> str:
        """The program header's one sentence about it (`schedules`: the program's framework)."""
        fw = schedules.framework
        trial = f"trial {self.best_trial}, " if self.best_trial is not None else ""
        head = (f"The study's best plan ({trial}{rate_text(self.best_throughput)})"
                f" {schedules.cannot(self.best)}")
        share = (f" ({100 * self.throughput / self.best_throughput:.1f}% of the best plan's)"
                 if self.best_throughput > 0 else "")
        if self.trial is not None:
            return (f"{head}; this program is the best plan {fw} can run: trial {self.trial},"
                    f" {rate_text(self.throughput)}{share}.")
        fixed = schedules.fixed(self.best, self.plan)
        if self.over is not None:
            number, rate = self.over
            return (f"{head}; this program is that plan with {fixed}, simulated at"
                    f" {rate_text(self.throughput)}{share}, which ranks above the best stored"
                    f" trial {fw} can run (trial {number}, {rate_text(rate)}).")
        if self.fits:
            breaks = (f"; it breaks the study's constraints ({self.broken})" if self.broken
                      else "")
            return (f"{head}; no stored trial {fw} can run fits and keeps the study's"
                    f" constraints, so this program is that plan with {fixed}, simulated at"
                    f" {rate_text(self.throughput)}{share}{breaks}.")
        return (f"{head}; no plan {fw} can run fits: no stored trial, nor that plan with"
                f" {fixed}, which this program holds ({self.reason}).")
