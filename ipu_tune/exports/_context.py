"""What every export reads, built once from the best trial: plan, profile, system, result, facts.

One place maps the config to the figures every export writes, so best.yaml, the PopTorch,
PopART and TensorFlow programs and the PopRun line cannot disagree.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ipu_tune.config import SYNTHETIC, EvalConfig
from ipu_tune.knobs import NEEDS, get_key, knob, moot_keys, pipeline_minimum
from ipu_tune.models import ModelProfile, model_label
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.simulator import (
    SIMULATOR_VERSION,
    HeadPlacement,
    SimConstants,
    SimResult,
    head_placement,
)

from ._facts import Facts
from ._schedules import POPART, POPTORCH, TENSORFLOW, Schedules, StandIn

__all__ = ["BEST_YAML", "EveryPlan", "ExportContext", "Provenance", "compile_problems",
           "export_context"]

BEST_YAML = "best.yaml"  # the best plan's file name, beside the other exports
# The all-reduce buffer the simulator merges gradients into, which the programs set in turn.
ALL_REDUCE_BUFFER_BYTES = int(SimConstants().all_reduce_buffer_bytes)


@dataclass(frozen=True)
class Provenance:
    """Where the exported plan comes from (best.yaml's `ipu_tune:` block)."""

    study: str
    trial: int
    storage: str  # display form (no credentials)
    objectives: Mapping[str, float] = field(default_factory=dict)
    evaluate: str = ""  # the command that evaluates best.yaml again
    simulator_version: str = SIMULATOR_VERSION

    @classmethod
    def of(cls, study: str, trial: int, storage: str, objectives: Mapping[str, float],
           out_dir: Path, names_code: bool = False, constants: str | None = None) -> Provenance:
        """The provenance of trial `trial`, whose best.yaml is written under `out_dir`;
        `names_code`: the plan's model is a `model._target_`, which evaluate reads from the
        file only with the trust flag; `constants`: the study's `simulator.constants` file,
        which evaluate needs to give its figures (best.yaml holds no simulator section)."""
        evaluate = f"python -m ipu_tune evaluate {shlex.quote(str(out_dir / BEST_YAML))}"
        evaluate += f" --constants {shlex.quote(constants)}" if constants else ""
        evaluate += " --trust-remote-code" if names_code else ""
        return cls(study, trial, storage, dict(objectives), evaluate)


@dataclass(frozen=True)
class ExportContext:
    """The best plan as the exports see it (frozen; derived figures are computed once)."""

    config: EvalConfig
    plan: ExecutionPlan
    profile: ModelProfile | None  # None: no profile (the checkpoints are left to the user)
    ipu: str
    num_ipus: int
    hosts: int  # host servers of the system
    result: SimResult | None  # None: the comments give no simulated figures
    provenance: Provenance | None = None
    # Set when this plan stands in for the study's best, which some framework cannot run.
    stand_in: StandIn | None = None

    def stand_in_lines(self, schedules: Schedules) -> list[str]:
        """The header's line saying which plan this is instead of the best (none: the best)."""
        return [self.stand_in.line(schedules)] if self.stand_in is not None else []

    @property
    def stages(self) -> int:
        return self.plan.stages

    @property
    def synthetic(self) -> bool:
        """The inputs are made on the IPU, as simulated (no host pipeline, no stream)."""
        return self.config.model.dataset.name == SYNTHETIC

    @property
    def replicas(self) -> int:
        """Replicas of the whole system (PopRun's --num-replicas)."""
        return self.plan.replication_factor

    @property
    def merges_all_reduces(self) -> bool:
        """Gradients are all-reduced across replicas: training with more than one replica."""
        return self.plan.training and self.replicas > 1

    @property
    def host_instances(self) -> int:
        """PopRun instances (host processes)."""
        return self.plan.host_instances

    @property
    def hosts_used(self) -> int:
        """Servers PopRun launches on: one instance runs on one server."""
        return max(1, min(self.hosts, self.host_instances))

    @property
    def pipelined(self) -> bool:
        """PopTorch's PipelinedExecution (more than one stage, not sharded)."""
        return bool(self.plan.pipelined)

    @property
    def model_label(self) -> str:
        """The model as an export's header names it: its factory, else its zoo name or its
        Transformers type (`model_label`)."""
        return self.config.model._target_ or model_label(self.config.model)

    @property
    def input_kind(self) -> str:
        """What the model reads (`ModelProfile.input_kind`); without a profile, tokens when the
        config gives a sequence length, else pixels."""
        if self.profile is not None:
            return self.profile.input_kind
        return "image" if self.config.model.sequence_length is None else "tokens"

    @cached_property
    def moot(self) -> frozenset[str]:
        """Keys of the knobs the plan does not run (`knobs.moot_keys`): no program sets them."""
        return moot_keys(self.config, self.profile.facts if self.profile else self.input_kind)

    def runs(self, key: str) -> bool:
        """Whether the plan runs knob `key` (a program sets only those)."""
        return key not in self.moot

    def not_run(self, key: str) -> str:
        """The comment a program writes in place of setting knob `key`, which the plan does
        not run (`runs`)."""
        k = knob(key)
        needs = " and ".join(NEEDS[n].text for n in k.needs)
        return (f"# {k.label or key} {k.text(get_key(self.config, key))}: not set; it runs only"
                f" with {needs}, which this plan has not (nor had the simulation).")

    @cached_property
    def head(self) -> HeadPlacement | None:
        """A tied output head the simulator ran on an earlier stage's IPU than the last (the
        embeddings' IPU0), which every program places there; None: none, or no profile."""
        if self.profile is None or self.stages == 1:
            return None
        return head_placement(self.profile, self.plan)

    @property
    def pipeline_stages(self) -> int:
        """Pipeline stages a program runs: a stage per IPU, and the placed head's own after
        them (on an IPU that already runs a stage: its input comes from the last one)."""
        return self.stages + (self.head is not None)

    @property
    def layout_text(self) -> str:
        """Replicas and stages as a program's first line says them: "2 replica(s) x 4
        stage(s)", or with a placed head "x 4 IPU(s), 5 pipeline stages (...)"."""
        head = self.head
        if head is None:
            return f"{self.replicas} replica(s) x {self.stages} stage(s)"
        kind = "stages" if self.plan.schedule == "sharded" else "pipeline stages"
        return (f"{self.replicas} replica(s) x {self.stages} IPU(s), {self.pipeline_stages}"
                f" {kind}: the tied head `{head.module}` a stage of its own on IPU{head.stage}")

    @property
    def device_mapping(self) -> list[int]:
        """The IPU of each pipeline stage (`pipeline_stages`)."""
        return [*range(self.stages), *([self.head.stage] if self.head is not None else [])]

    @cached_property
    def facts(self) -> Facts:
        """The sentences quoting the simulated result, shared by every program."""
        return Facts(self.plan, self.result)


def export_context(config: EvalConfig, result: SimResult | None = None,
                   profile: ModelProfile | None = None,
                   provenance: Provenance | None = None,
                   stand_in: StandIn | None = None) -> ExportContext:
    """The context of the plan of `config` (its simulated `result`, its model `profile`)."""
    return ExportContext(
        config=config,
        plan=plan_from_config(config),
        profile=profile,
        ipu=str(config.system.ipu),
        num_ipus=int(config.system.num_ipus),
        hosts=int(config.system.servers),
        result=result,
        provenance=provenance,
        stand_in=stand_in,
    )


def compile_problems(ctx: ExportContext, framework: str = "poptorch") -> list[str]:
    """The framework's own compile-time rules this plan breaks (empty: none).

    PopTorch (Compiler.cpp L675-701): with PipelinedExecution, training needs
    gradientAccumulation >= pipeline stages and inference deviceIterations >= stages.
    The framework's other rules (`Schedules.rules`: TensorFlow shards offloaded optimizer
    state only), which the plan chooser keeps a program's plan from breaking when it can.
    PopRun: replicas split evenly among instances, instances evenly among hosts.
    """
    p = ctx.plan
    runs = {"poptorch": POPTORCH, "popart": POPART, "tensorflow": TENSORFLOW}[framework]
    out = [f"the plan {r.uses}, which {runs.framework} cannot run{r.why}" for r in runs.broken(p)]
    # The placed head is a pipeline stage of its own in both frameworks' programs.
    rule = pipeline_minimum(p.training, ctx.pipeline_stages, p.schedule)
    if framework in ("poptorch", "popart") and rule is not None:
        name = knob(rule[0]).field
        if getattr(p, name) < rule[1]:
            out.append(f"{name.replace('_', ' ')} {getattr(p, name)} < {rule[1]} pipeline "
                       "stages")
    if ctx.replicas % ctx.host_instances:
        out.append(
            f"{ctx.replicas} replicas do not split evenly among {ctx.host_instances} instances"
        )
    if ctx.host_instances % ctx.hosts_used:
        out.append(
            f"{ctx.host_instances} instances do not split evenly among {ctx.hosts_used} hosts")
    return out


class EveryPlan:
    """Base of an exporter every plan has (the `Exporter` protocol's `applies` is always True)
    and whose framework runs every pipeline schedule unless it declares `schedules`."""

    schedules: Schedules | None = None

    def applies(self, ctx: ExportContext) -> bool:
        return True
