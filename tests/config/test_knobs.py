"""The knob declarations (`ipu_tune.knobs`) and everything that must agree with them."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import typing
from pathlib import Path

import pytest

from ipu_tune.config import EvalConfig, PipelineConfig, PlanConfig, WorkloadConfig, validate
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS, PLAN_KNOBS, WORKLOAD_KNOBS, get_key, knob, moot_keys
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.search import KNOBS as SPACE_KNOBS
from ipu_tune.search._objectives import CHANGE_KEYS
from ipu_tune.storage import PLAN_COLUMNS

ROOT = Path(__file__).resolve().parents[2]


def _fields(cls: type) -> dict[str, object]:
    out = {}
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out[f.name] = default
    return out


def test_schema_sections_spell_out_exactly_the_declared_knobs() -> None:
    workload = _fields(WorkloadConfig)
    assert workload == {k.key.split(".")[1]: k.default for k in WORKLOAD_KNOBS}
    # (plan.from_ipu_config names a file to start from, ipu_config_carried what of it the
    # export carries: no knobs.)
    plan = {n: v for n, v in _fields(PlanConfig).items()
            if n not in ("pipeline", "from_ipu_config", "ipu_config_carried")}
    pipeline = _fields(PipelineConfig)
    declared_plan = {k.key.split(".", 1)[1]: k.default for k in PLAN_KNOBS}
    have = {**plan, **{f"pipeline.{n}": v for n, v in pipeline.items()}}
    have = {n: tuple(v) if isinstance(v, list) else v for n, v in have.items()}
    assert have == declared_plan


def test_execution_plan_fields_are_the_knob_fields_with_their_defaults() -> None:
    assert _fields(ExecutionPlan) == {k.field: k.default for k in KNOBS}
    hints = {f.name: f.type for f in dataclasses.fields(ExecutionPlan)}
    for k in KNOBS:
        assert (typing.get_origin(hints[k.field]) or hints[k.field]) is k.type, k.key


def test_plan_from_config_carries_every_knob() -> None:
    cfg = EvalConfig()
    cfg.plan.host_instances = 4
    cfg.plan.partials = "half"
    cfg.plan.pipeline.splits = ["layer1"]
    plan = plan_from_config(cfg)
    for k in KNOBS:
        value = get_key(cfg, k.key)
        assert getattr(plan, k.field) == (tuple(value) if k.type is tuple else value)
    assert plan.host_instances == 4 and plan.partials == "half"


def test_plan_from_config_builds_the_instance_the_constructor_would() -> None:
    """plan_from_config skips the generated __init__: same fields, equality, hash, pickling."""
    cfg = EvalConfig()
    cfg.plan.pipeline.splits = ["layer1", "layer3"]
    plan = plan_from_config(cfg)
    again = ExecutionPlan(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)})
    assert plan == again and again == plan and hash(plan) == hash(again)
    assert vars(plan) == vars(again)
    assert pickle.loads(pickle.dumps(plan)) == plan
    assert plan.splits == ("layer1", "layer3") and plan.stages == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.mode = "infer"  # type: ignore[misc]


def test_store_columns_change_keys_and_space_knobs_derive_from_the_declarations() -> None:
    assert [name for name, _ in PLAN_COLUMNS] == [k.column for k in KNOBS]
    assert tuple(k.key for k in KNOBS if k.change) == CHANGE_KEYS
    assert "workload.mode" not in CHANGE_KEYS
    assert set(SPACE_KNOBS) == {k.key for k in KNOBS if k.draw}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("plan.host_instances", 0, "must be a power of two (1, 2, 4, ...)"),
    ("plan.host_instances", 3, "must be a power of two (1, 2, 4, ...)"),
    ("plan.partials", "double", "allowed: float, half"),
    ("plan.recompute", "sometimes", "allowed: auto, none, checkpoints, every_block"),
])
def test_new_knobs_are_checked_with_the_key_the_value_and_what_is_allowed(
        key: str, value: object, message: str) -> None:
    cfg = EvalConfig()
    *parents, leaf = key.split(".")
    node: object = cfg
    for part in parents:
        node = getattr(node, part)
    setattr(node, leaf, value)
    with pytest.raises(IpuTuneError) as info:
        validate(cfg)
    assert (key in str(info.value) and repr(value) in str(info.value)) or str(value) in str(
        info.value)
    assert message in str(info.value)


def test_recompute_auto_is_the_default_and_drawn_from_a_null_spec() -> None:
    """`auto` is PopTorch's default (pipeline recomputation when pipelined), with physics in
    the simulator (`ipu_tune.simulator.recompute_mode`)."""
    cfg = EvalConfig()
    assert cfg.plan.recompute == "auto" == ExecutionPlan().recompute
    validate(cfg)
    assert "auto" in (knob("plan.recompute").natural or ())


# Places that derive every knob from `ipu_tune.knobs` and name none by hand. The codec's
# global-batch arithmetic names GA and the micro-batch.
_DERIVED = ("ipu_tune/config/_schema.py", "ipu_tune/plan.py", "ipu_tune/search/_space.py",
            "ipu_tune/search/_objectives.py", "ipu_tune/storage/_results_table.py",
            "ipu_tune/report/_table.py", "ipu_tune/cli/_summary.py", "ipu_tune/search/_codec.py",
            "ipu_tune/cli/evaluate_format.py", "ipu_tune/cli/_comparison.py")
_ARITHMETIC = {("ipu_tune/search/_codec.py", "plan.gradient_accumulation"),
               ("ipu_tune/search/_codec.py", "workload.micro_batch_size")}


def test_no_knob_key_is_written_by_hand_where_it_derives_from_the_declarations() -> None:
    for k in KNOBS:
        found = subprocess.run(["git", "grep", "-l", "-F", f'"{k.key}"', "--", *_DERIVED],
                               cwd=ROOT, capture_output=True, text=True).stdout.split()
        assert {(f, k.key) for f in found} <= _ARITHMETIC, (k.key, found)


def test_run_summary_names_every_labelled_knob_with_its_value() -> None:
    import ipu_tune
    from ipu_tune.cli._summary import format_summary
    from ipu_tune.tuner import RunSummary

    cfg = EvalConfig()
    cfg.system.num_ipus = 2
    cfg.plan.pipeline.splits = ["layer3.8"]
    cfg.plan.host_instances = 2
    cfg.plan.precision, cfg.plan.partials = "16.16", "half"
    cfg.plan.available_memory_proportion_per_ipu = [0.2, 0.4]
    result = ipu_tune.evaluate_config(cfg)
    text = format_summary(RunSummary("s", "j", 1, 1, (), 0, cfg, result))
    plan_line = next(line for line in text.splitlines() if line.startswith("plan: "))
    moot = moot_keys(cfg)  # knobs the plan does not run: left out
    assert moot == {"plan.available_memory_proportion", "plan.replicated_tensor_sharding"}
    for k in KNOBS:
        if k.label:
            shown = f"{k.label} {k.text(get_key(cfg, k.key))}" in plan_line
            assert shown == (k.key not in moot), k.key
    assert "splits ['layer3.8']" in plan_line and "instances 2" in plan_line
    assert "partials half" in plan_line and "AMP 0.6" not in plan_line
    assert "AMP per IPU [0.2, 0.4]" in plan_line


def test_a_quiet_knob_is_left_out_of_plan_lines_at_its_default() -> None:
    from ipu_tune.knobs import describe

    line = describe(EvalConfig())
    assert "AMP 0.6" in line and "AMP per IPU" not in line
