"""Split encoding (every draw valid) and the balanced-split planner (PipeDream's DP)."""

from __future__ import annotations

import copy
import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config
from ipu_tune.search import StageCostModel, balanced_split, cuts_to_starts, even_split, stage_loads
from ipu_tune.search._splits import simulator_block_cycles
from ipu_tune.search._warm import balanced_config
from tests.search._helpers import compose_cfg, make_problem


@given(st.integers(2, 60).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.integers(-5, n + 5), min_size=0, max_size=n - 1))))
def test_any_cuts_decode_to_strictly_increasing_stage_starts(case: tuple[int, list[int]]) -> None:
    n, cuts = case
    starts = cuts_to_starts(cuts, n)
    assert starts[0] == 0 and len(starts) == len(cuts) + 1
    assert all(a < b for a, b in itertools.pairwise(starts))
    assert starts[-1] <= n - 1


def test_sorted_distinct_cuts_decode_to_themselves() -> None:
    assert cuts_to_starts([16, 3, 9], 35) == (0, 3, 9, 16)
    assert cuts_to_starts([5, 5], 10) == (0, 5, 6)  # pushed apart, not rejected
    assert cuts_to_starts([9, 9], 10) == (0, 8, 9)
    assert even_split(35, 2) == (0, 18)


def _stage_times(cfg_overrides: list[str]) -> tuple[list[float], list[float], list[str], list[str]]:
    problem = make_problem(compose_cfg(*cfg_overrides))
    base = problem.codec.base
    stages = len(base.plan.pipeline.splits) + 1
    naive = copy.deepcopy(base)
    naive.plan.pipeline.splits = [problem.codec.blocks[b]
                                  for b in even_split(len(problem.codec.blocks), stages)[1:]]
    balanced = balanced_config(problem, base)
    out = []
    for cfg in (naive, balanced):
        result = problem.simulate(cfg)
        assert result.fits
        out.append([s.forward_s + s.backward_s + s.recompute_s for s in result.stages])
    return out[0], out[1], naive.plan.pipeline.splits, balanced.plan.pipeline.splits


def test_balanced_split_is_better_balanced_than_the_naive_one() -> None:
    naive, balanced, naive_splits, balanced_splits = _stage_times([
        "model=resnet50", "system.num_ipus=4", "workload.micro_batch_size=1",
        "plan.precision=16.16", "plan.pipeline.splits=[layer2.0,layer3.0,layer4.0]",
        "plan.gradient_accumulation=4"])
    assert balanced_splits != naive_splits
    # The simulator's own stage times: the slowest stage is faster, the spread narrower.
    assert max(balanced) < max(naive)
    assert max(balanced) / (sum(balanced) / 4) < max(naive) / (sum(naive) / 4)


def _model(*overrides: str) -> StageCostModel:
    cfg = compose_cfg(*overrides)
    return StageCostModel(profile_model(cfg.model), plan_from_config(cfg))


def test_dp_split_is_the_exhaustive_min_max_split_without_a_memory_limit() -> None:
    model = _model("model=resnet18", "workload.micro_batch_size=8")
    n = len(model.profile.block_stats)
    for stages in (2, 3, 4):
        dp = balanced_split(model, stages, limit_bytes=float("inf"))
        best = min(max(stage_loads(model, (0, *c)))
                   for c in itertools.combinations(range(1, n), stages - 1))
        assert max(stage_loads(model, dp)) == pytest.approx(best)


def test_dp_split_respects_the_memory_limit() -> None:
    model = _model("model=resnet101", "workload.micro_batch_size=32", "plan.precision=16.16")
    n, stages = len(model.profile.block_stats), 2
    fastest = balanced_split(model, stages, limit_bytes=float("inf"))

    def memory(starts: tuple[int, ...]) -> list[float]:
        ends = [*starts[1:], n]
        return [model.stage_memory_bytes(s, e, i, stages)
                for i, (s, e) in enumerate(zip(starts, ends, strict=True))]

    limit = 0.9 * max(memory(fastest))
    fitting = balanced_split(model, stages, limit_bytes=limit)
    assert fitting != fastest
    assert max(memory(fitting)) <= limit
    # ... and it is the fastest of the splits that fit.
    feasible = [(0, c) for c in range(1, n) if max(memory((0, c))) <= limit]
    assert max(stage_loads(model, fitting)) == pytest.approx(
        min(max(stage_loads(model, s)) for s in feasible))


def test_stage_memory_estimate_follows_the_stash_depths_of_the_seed_guide() -> None:
    # Grouped: 2(N-s)+1 stashed activations on stage s; interleaved N+1 (seed guide 4.2).
    grouped = _model("model=resnet18", "system.num_ipus=4",
                     "plan.pipeline.splits=[layer2.0,layer3.0,layer4.0]")
    interleaved = _model("model=resnet18", "system.num_ipus=4",
                         "plan.pipeline.splits=[layer2.0,layer3.0,layer4.0]",
                         "plan.pipeline.schedule=interleaved")
    first = grouped.stage_memory_bytes(1, 3, 0, 4)
    last = grouped.stage_memory_bytes(1, 3, 3, 4)
    assert first > last  # the same blocks cost more on the first IPU (9 vs 3 stashed)
    assert interleaved.stage_memory_bytes(1, 3, 0, 4) == interleaved.stage_memory_bytes(1, 3, 3, 4)


def test_planner_times_blocks_with_the_simulators_own_costs() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101")
    problem = make_problem(cfg)
    plan = dataclasses.replace(plan_from_config(cfg), recompute="none")
    cycles = simulator_block_cycles(problem.profile, problem.system, plan)
    assert cycles is not None and len(cycles) == len(problem.profile.blocks)
    assert all(c > 0 for c in cycles)
    recompute = simulator_block_cycles(problem.profile, problem.system,
                                       dataclasses.replace(plan, recompute="checkpoints"))
    assert recompute is not None and sum(recompute) > sum(cycles)


@pytest.mark.parametrize("overrides", [
    ("plan.recompute=none",), ("plan.recompute=checkpoints",), ("plan.recompute=every_block",),
    ("plan.recompute=every_block", "plan.offload_optimizer_state=true"),
    ("workload.mode=infer", "plan.gradient_accumulation=1"),
])
def test_the_stage_memory_of_every_block_range_is_its_formula(overrides: tuple[str, ...]) -> None:
    """The planner's estimate of blocks [i, j) as a stage, computed for all ranges at once,
    against the formula summed block by block: weights, accumulators and optimizer state per
    parameter; the stash (stage input, inner outputs for every_block, or every saved
    activation without recomputation) times the depth, plus the largest recomputed block;
    the largest live block."""
    from ipu_tune.simulator import state_bytes_per_param

    model = _model("model=resnet18", "workload.micro_batch_size=4", "plan.precision=16.16",
                   *overrides)
    p, blocks = model.plan, model.profile.block_stats
    per_param = 2.0 + ((2 + (0 if p.offload_optimizer_state else state_bytes_per_param(
        p.optimizer, True))) if p.training else 0)
    for depth in (1, 3):
        matrix = model.memory_matrix(depth)
        for i, j in itertools.combinations(range(len(blocks) + 1), 2):
            part = blocks[i:j]
            first_in = (model.profile.input_elements if i == 0
                        else blocks[i - 1].output_elements)
            if not p.training:
                stash = 0
            elif p.recompute == "none":
                stash = sum(b.saved_elements for b in part) * depth
            else:
                inner = sum(b.output_elements for b in part[:-1])
                kept = first_in + (inner if p.recompute == "every_block" else 0)
                stash = kept * depth + max(b.saved_elements for b in part)
            live = max(b.max_live_elements for b in part)
            want = sum(b.parameters for b in part) * per_param + (stash + live) * 4 * 2
            assert matrix[i, j] == pytest.approx(want, rel=1e-12), (i, j, depth)
