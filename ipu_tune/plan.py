"""How the model is run: the execution plan the tuner searches, and its checks against a model.

`ExecutionPlan` is the frozen, simulator-facing form of the config's `workload` and `plan`
sections. Choice and range checks happen once at the edge (`ipu_tune.config`); this module adds
the checks that need the model profile (split names exist and are in order).
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ipu_tune.config import EvalConfig
from ipu_tune.errors import bad_value
from ipu_tune.knobs import KNOBS, Knob, knob_by_field
from ipu_tune.models import ModelProfile

__all__ = ["ExecutionPlan", "plan_from_config", "stage_starts"]

_SPLITS_KEY = knob_by_field("splits").key


class _Plan:
    """What a plan derives from its knobs. `ExecutionPlan` is this with one frozen field per
    knob of `ipu_tune.knobs` (name, type and default declared there only): for mypy a knob is
    any attribute of the plan."""

    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Any]]

        def __init__(self, **knobs: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...

    @property
    def training(self) -> bool:
        return self.mode == "train"

    @property
    def stages(self) -> int:
        return len(self.splits) + 1

    @property
    def pipelined(self) -> bool:
        """PopTorch's PipelinedExecution: more than one stage, not sharded (stages run one
        after another: `ShardedExecution`)."""
        return self.stages > 1 and self.schedule != "sharded"

    @property
    def input_fp16(self) -> bool:
        return self.precision.split(".")[0] == "16"

    @property
    def model_fp16(self) -> bool:
        return self.precision.split(".")[1] == "16"

    @property
    def stage_memory_proportions(self) -> tuple[float, ...]:
        """The available memory proportion of each stage's IPU: the per-IPU list, else the one
        proportion on every IPU."""
        per_ipu, stages = self.available_memory_proportion_per_ipu, self.stages
        if not per_ipu:
            return (self.available_memory_proportion,) * stages
        if len(per_ipu) != stages:
            raise bad_value(knob_by_field("available_memory_proportion_per_ipu").key,
                            list(per_ipu), f"one value per IPU of a replica ({stages})")
        return tuple(per_ipu)

    @property
    def samples_per_step(self) -> int:
        """Samples per weight update across all replicas (the global batch)."""
        return self.micro_batch_size * self.gradient_accumulation * self.replication_factor

    @property
    def samples_per_call(self) -> int:
        """Samples the host hands over per model call (seed pipelining tutorial)."""
        return self.samples_per_step * self.device_iterations


def _field_type(k: Knob) -> Any:
    return tuple[k.item, ...] if k.type is tuple else k.type  # type: ignore[name-defined]


if TYPE_CHECKING:
    class ExecutionPlan(_Plan): ...
else:  # the simulator's input: one frozen, hashable field per knob, in the order of KNOBS
    ExecutionPlan = make_dataclass(
        "ExecutionPlan", [(k.field, _field_type(k), field(default=k.default)) for k in KNOBS],
        bases=(_Plan,), frozen=True, namespace={"__module__": __name__})

# The fields of the lists that become tuples.
_AS_TUPLE = tuple(k.field for k in KNOBS if k.type is tuple)
# `plan_from_config` merges the workload, plan and plan.pipeline sections: every knob's key
# must be its field in one of them.
_SECTIONS = ("workload", "plan", "plan.pipeline")
if any(k.key.rpartition(".")[0] not in _SECTIONS or not k.key.endswith("." + k.field)
       for k in KNOBS):
    raise ImportError("every knob must be a field of the workload, plan or plan.pipeline section")


def plan_from_config(cfg: EvalConfig) -> ExecutionPlan:
    """The plan of a config: every knob's value, lists made tuples (the plan is hashable)."""
    plan_cfg = cfg.plan
    # The sections' own values, merged (checked above): a third of reading 20 dotted keys.
    values: dict[str, Any] = {**vars(cfg.workload), **vars(plan_cfg), **vars(plan_cfg.pipeline)}
    del values["pipeline"]
    values.pop("from_ipu_config", None)
    values.pop("ipu_config_carried", None)
    for name in _AS_TUPLE:
        values[name] = tuple(values[name])
    # The instance `ExecutionPlan(**values)` makes, without its generated __init__: a frozen
    # dataclass sets each of its fields through object.__setattr__, two thirds of this
    # function's cost (`evaluate` and every tuner trial build a plan). Same fields, equality,
    # hash and pickling: tests/config/test_knobs.py.
    plan = object.__new__(ExecutionPlan)
    object.__setattr__(plan, "__dict__", values)
    return plan


def stage_starts(plan: ExecutionPlan, profile: ModelProfile) -> tuple[int, ...]:
    """Block index at which each stage begins (stage 0 begins at block 0).

    Raises `IpuTuneError` when a split is not a block of the model, is the first block, or the
    splits are out of execution order.
    """
    indices = _block_indices(profile)
    starts = [0]
    for split in plan.splits:
        index = indices.get(split)
        if index is None:
            names = profile.blocks
            hint = ", ".join(names[1:6]) + (", ..." if len(names) > 6 else "")
            raise bad_value(
                _SPLITS_KEY, split, f"not a block of {profile.name}; blocks: {hint}"
            )
        if index == 0:
            raise bad_value(_SPLITS_KEY, split, "the first block always begins stage 1")
        if index <= starts[-1]:
            raise bad_value(
                _SPLITS_KEY, list(plan.splits), "must follow the model's block order"
            )
        starts.append(index)
    return tuple(starts)


# {block name: index} of recent profiles, on the profile object's identity: listing a profile's
# block names per call cost more than the rest of `stage_starts`, which `evaluate` and every
# tuner trial run. The entry keeps its profile alive, so the id is not reused while cached;
# only memoisation, so a race between threads costs at most a rebuild.
_INDICES: dict[int, tuple[ModelProfile, dict[str, int]]] = {}
_INDICES_SIZE = 16


def _block_indices(profile: ModelProfile) -> dict[str, int]:
    hit = _INDICES.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1]
    indices: dict[str, int] = {}
    for i, block in enumerate(profile.block_stats):
        indices.setdefault(block.name, i)  # the first of a repeated name, as list.index
    if len(_INDICES) >= _INDICES_SIZE:
        _INDICES.clear()
    _INDICES[id(profile)] = (profile, indices)
    return indices
