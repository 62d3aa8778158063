"""What the framework exports read of a config: the plan plus the system's hosts and instances.

One place maps the config to the figures every export writes, so the PopTorch, PopART and
TensorFlow programs and the PopRun line cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipu_tune.config import EvalConfig
from ipu_tune.plan import ExecutionPlan, plan_from_config

__all__ = ["ExportPlan", "compile_problems", "export_plan", "model_label"]


@dataclass(frozen=True)
class ExportPlan:
    plan: ExecutionPlan
    recompute: str  # auto | none | checkpoints | every_block
    partials: str  # float | half
    host_instances: int  # PopRun instances (host processes)
    hosts: int  # host servers
    num_ipus: int
    ipu: str

    @property
    def stages(self) -> int:
        return self.plan.stages

    @property
    def replicas(self) -> int:
        """Replicas of the whole system (PopRun's --num-replicas)."""
        return self.plan.replication_factor

    @property
    def local_replicas(self) -> int:
        """Replicas of one instance (PopTorch's replicationFactor under PopRun)."""
        return max(1, self.replicas // max(1, self.host_instances))

    @property
    def hosts_used(self) -> int:
        """Servers PopRun launches on: one instance runs on one server."""
        return max(1, min(self.hosts, self.host_instances))

    @property
    def pipelined(self) -> bool:
        """PopTorch's PipelinedExecution (more than one stage, not sharded)."""
        return self.stages > 1 and self.plan.schedule != "sharded"


def export_plan(cfg: EvalConfig) -> ExportPlan:
    plan = plan_from_config(cfg)
    return ExportPlan(
        plan=plan,
        recompute=plan.recompute,
        partials=plan.partials,
        host_instances=plan.host_instances,
        hosts=int(cfg.system.hosts),
        num_ipus=int(cfg.system.num_ipus),
        ipu=str(cfg.system.ipu),
    )


def compile_problems(xp: ExportPlan, framework: str = "poptorch") -> list[str]:
    """The framework's own compile-time rules this plan breaks (empty: none).

    PopTorch (framework-apis.md 1.2, Compiler.cpp L675-701): with PipelinedExecution, training
    needs gradientAccumulation >= pipeline stages and inference deviceIterations >= stages.
    PopRun (4.1): replicas split evenly among instances, instances evenly among hosts.
    """
    p = xp.plan
    out: list[str] = []
    if framework in ("poptorch", "popart") and xp.pipelined:
        if p.training and p.gradient_accumulation < xp.stages:
            out.append(
                f"gradient accumulation {p.gradient_accumulation} < {xp.stages} pipeline stages"
            )
        if not p.training and p.device_iterations < xp.stages:
            out.append(f"device iterations {p.device_iterations} < {xp.stages} pipeline stages")
    if xp.replicas % xp.host_instances:
        out.append(
            f"{xp.replicas} replicas do not split evenly among {xp.host_instances} instances"
        )
    if xp.host_instances % xp.hosts_used:
        out.append(f"{xp.host_instances} instances do not split evenly among {xp.hosts_used} hosts")
    return out


def model_label(cfg: EvalConfig) -> str:
    """The model as an export's header names it: its zoo name, else its factory."""
    return cfg.model.name or cfg.model._target_ or "model"
