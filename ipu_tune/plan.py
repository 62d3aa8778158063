"""How the model is run: the execution plan the tuner searches, and its checks against a model.

`ExecutionPlan` is the frozen, simulator-facing form of the config's `workload` and `plan`
sections. Choice and range checks happen once at the edge (`ipu_tune.config`); this module adds
the checks that need the model profile (split names exist and are in order).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from ipu_tune.config import EvalConfig
from ipu_tune.errors import bad_value
from ipu_tune.knobs import KNOBS, knob_by_field
from ipu_tune.models import ModelProfile

__all__ = ["ExecutionPlan", "plan_from_config", "stage_starts"]

_SPLITS_KEY = knob_by_field("splits").key


# The fields are the knobs of `ipu_tune.knobs` (same names, types and defaults), spelled out so
# that mypy types the simulator's input; tests/config/test_knobs.py checks they match.
@dataclass(frozen=True)
class ExecutionPlan:
    mode: str = "train"  # train | infer
    micro_batch_size: int = 64
    optimizer: str = "adamw"
    precision: str = "32.32"  # "<input>.<model>" as in the seed tutorial
    gradient_accumulation: int = 1
    device_iterations: int = 1
    replication_factor: int = 1
    splits: tuple[str, ...] = ()  # block names beginning stages 2..N
    schedule: str = "grouped"
    recompute: str = "auto"  # auto | none | checkpoints | every_block (knobs.py)
    available_memory_proportion: float = 0.6
    offload_optimizer_state: bool = False
    replicated_tensor_sharding: bool = False
    prefetch_depth: int = 1
    io_tiles: int = 0
    eight_bit_io: bool = False
    async_dataloader: bool = False
    dataloader_workers: int = 1
    host_instances: int = 1  # PopRun instances (host processes) sharing the servers
    partials: str = "float"  # partials type of matmuls/convolutions: float | half

    @property
    def training(self) -> bool:
        return self.mode == "train"

    @property
    def stages(self) -> int:
        return len(self.splits) + 1

    @property
    def input_fp16(self) -> bool:
        return self.precision.split(".")[0] == "16"

    @property
    def model_fp16(self) -> bool:
        return self.precision.split(".")[1] == "16"

    @property
    def samples_per_step(self) -> int:
        """Samples per weight update across all replicas (the global batch)."""
        return self.micro_batch_size * self.gradient_accumulation * self.replication_factor

    @property
    def samples_per_call(self) -> int:
        """Samples the host hands over per model call (seed pipelining tutorial)."""
        return self.samples_per_step * self.device_iterations


# Every knob's value of a config in one C call, in ExecutionPlan's field order (checked here),
# and the positions of the lists that become tuples.
_KNOB_VALUES = attrgetter(*(k.key for k in KNOBS))
_AS_TUPLE = tuple(i for i, k in enumerate(KNOBS) if k.type is tuple)
if tuple(f.name for f in fields(ExecutionPlan)) != tuple(k.field for k in KNOBS):
    raise ImportError("ExecutionPlan's fields must follow ipu_tune.knobs.KNOBS in order")


def plan_from_config(cfg: EvalConfig) -> ExecutionPlan:
    """The plan of a config: every knob's value, lists made tuples (the plan is hashable)."""
    values: list[Any] = list(_KNOB_VALUES(cfg))
    for i in _AS_TUPLE:
        values[i] = tuple(values[i])
    return ExecutionPlan(*values)


def stage_starts(plan: ExecutionPlan, profile: ModelProfile) -> tuple[int, ...]:
    """Block index at which each stage begins (stage 0 begins at block 0).

    Raises `IpuTuneError` when a split is not a block of the model, is the first block, or the
    splits are out of execution order.
    """
    names = profile.blocks
    starts = [0]
    for split in plan.splits:
        if split not in names:
            hint = ", ".join(names[1:6]) + (", ..." if len(names) > 6 else "")
            raise bad_value(
                _SPLITS_KEY, split, f"not a block of {profile.name}; blocks: {hint}"
            )
        index = names.index(split)
        if index == 0:
            raise bad_value(_SPLITS_KEY, split, "the first block always begins stage 1")
        if index <= starts[-1]:
            raise bad_value(
                _SPLITS_KEY, list(plan.splits), "must follow the model's block order"
            )
        starts.append(index)
    return tuple(starts)
