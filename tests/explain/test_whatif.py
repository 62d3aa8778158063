"""Sensitivity of a plan: pipeline cuts one block earlier/later, replicas doubled and halved."""

from __future__ import annotations

import copy

import optuna

from ipu_tune.config import EvalConfig
from ipu_tune.explain import sensitivity
from tests.search._helpers import compose_cfg, make_problem

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _plan(*overrides: str) -> tuple[object, EvalConfig]:
    cfg = compose_cfg("+experiment=seed_resnet101", "search=throughput", *overrides)
    problem = make_problem(cfg)
    return problem, problem.codec.user


def test_each_cut_moves_one_block_and_replicas_double_on_the_same_ipus() -> None:
    problem, cfg = _plan("plan.precision=16.16")  # the seed's plan at FP16: two stages
    blocks = list(problem.profile.blocks)  # type: ignore[attr-defined]
    (cut,) = cfg.plan.pipeline.splits
    at = blocks.index(cut)
    rows = sensitivity(problem, cfg)  # type: ignore[arg-type]
    cuts = [r for r in rows if r["knob"] == "pipeline cut 1"]
    assert [r["value"] for r in cuts] == [blocks[at - 1], blocks[at + 1]]
    for r in cuts:  # each row is that plan simulated
        moved = copy.deepcopy(cfg)
        moved.plan.pipeline.splits = [r["value"]]
        got = problem.evaluate(moved).result  # type: ignore[attr-defined]
        assert r["fits"] == got.fits and r["throughput"] == got.throughput
        assert r["peak_memory_bytes"] == max(got.memory_per_ipu)
    replicas = [r for r in rows if r["knob"] == "replicas"]
    # 1 replica x 2 stages on 2 IPUs: doubling gives 2 replicas of one stage; no halving.
    assert [r["value"] for r in replicas] == ["2 (1 stage)"]
    one = copy.deepcopy(cfg)
    one.plan.replication_factor, one.plan.pipeline.splits = 2, []
    got = problem.evaluate(one).result  # type: ignore[attr-defined]
    assert replicas[0]["fits"] == got.fits and replicas[0]["throughput"] == got.throughput


def test_replicas_halve_onto_twice_the_stages_when_the_blocks_allow() -> None:
    problem, cfg = _plan("plan.precision=16.16", "system.num_ipus=4",
                         "plan.replication_factor=2")
    rows = sensitivity(problem, cfg)  # type: ignore[arg-type]
    values = sorted(r["value"] for r in rows if r["knob"] == "replicas")
    assert values == ["1 (4 stages)", "4 (1 stage)"]
    assert all(r["valid"] for r in rows if r["knob"] in ("replicas", "pipeline cut 1"))


def test_an_unpipelined_single_replica_plan_has_no_cut_or_replica_rows() -> None:
    problem, cfg = _plan("plan.precision=16.16", "system.num_ipus=1",
                         "plan.pipeline.splits=[]")
    rows = sensitivity(problem, cfg)  # type: ignore[arg-type]
    assert not [r for r in rows if r["knob"] in ("replicas",) or r["knob"].startswith("pipe")]


def test_each_row_says_whether_the_study_could_have_chosen_it() -> None:
    """A faster neighbour outside the preset's range (GA 128 > the space's 64) or pinned by the
    user is marked: it does not contradict the study's best, the study could not draw it."""
    overrides = ("plan.precision=16.16", "plan.gradient_accumulation=64", "plan.eight_bit_io=true")
    problem = make_problem(compose_cfg("+experiment=seed_resnet101", "search=throughput",
                                       *overrides), pinned=["plan.eight_bit_io"])
    rows = {(r["key"], str(r["value"])): r for r in sensitivity(problem, problem.codec.user)}
    assert rows[("plan.gradient_accumulation", "32")]["searched"] is True
    assert rows[("plan.gradient_accumulation", "128")]["searched"] is False  # high: 64
    assert rows[("plan.eight_bit_io", "False")]["searched"] is False  # pinned on the command line
    assert rows[("plan.offload_optimizer_state", "True")]["searched"] is True
    # The replicas row shows its stages beside the count; the study draws the count.
    assert rows[("plan.replication_factor", "2 (1 stage)")]["searched"] is True


def test_no_row_moves_a_knob_the_plan_does_not_run() -> None:
    """The seed plan at 32.32 on one stage: moving the partials type or the schedule changes
    nothing the simulator computes, so neither is a what-if (nor is the one proportion when a
    per-IPU list runs in its place)."""
    problem, cfg = _plan("system.num_ipus=1", "plan.pipeline.splits=[]")
    assert cfg.plan.precision == "32.32"
    keys = {r["key"] for r in sensitivity(problem, cfg)}  # type: ignore[arg-type]
    assert not {"plan.partials", "plan.pipeline.schedule"} & keys, keys
    assert "plan.precision" in keys
    problem, cfg = _plan("plan.precision=16.16",
                         "plan.available_memory_proportion_per_ipu=[0.3,0.5]")
    keys = {r["key"] for r in sensitivity(problem, cfg)}  # type: ignore[arg-type]
    assert "plan.available_memory_proportion" not in keys and "plan.partials" in keys
