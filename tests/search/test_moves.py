"""Pipeline moves of the local search: chains of cuts, re-balanced splits, replica changes."""

from __future__ import annotations

import itertools
import random

from ipu_tune.plan import plan_from_config
from ipu_tune.search import LocalSearch, StageCostModel, even_split, stage_loads
from ipu_tune.search._moves import cut_moves, cuts_of, min_max_starts
from ipu_tune.search._splits import simulator_block_cycles
from tests.search._helpers import compose_cfg, make_problem

_R152_8 = ("model=resnet152", "system=pod16", "system.num_ipus=8",
           "workload.micro_batch_size=16", "plan.replication_factor=1")


def test_cut_moves_shift_chains_of_neighbouring_cuts_together() -> None:
    moves = [tuple(m) for m in cut_moves([10, 20, 30, 40], 1, 50)]
    assert (11, 21, 31, 41) in moves and (9, 19, 29, 39) in moves  # the whole split
    assert (10, 21, 31, 41) in moves  # every cut after the first: toward the first stage
    assert (11, 21, 31, 40) in moves  # every cut before the last
    assert (10, 21, 31, 40) in moves  # an inner pair
    assert (13, 20, 30, 40) in moves  # one cut alone, as before
    for m in moves:  # every move a valid split
        assert all(1 <= c <= 50 for c in m) and all(a < b for a, b in itertools.pairwise(m))


def test_cut_moves_stay_strictly_increasing_at_the_ends() -> None:
    moves = [tuple(m) for m in cut_moves([1, 2, 49], 1, 49)]
    assert (2, 3, 49) in moves  # the first two, one block later together
    assert not any(m[0] < 1 or m[-1] > 49 for m in moves)
    assert all(len(set(m)) == 3 for m in moves)


def test_a_knob_change_re_plans_the_split_so_that_the_plan_fits() -> None:
    problem = make_problem(compose_cfg(*_R152_8), pinned=["plan.replication_factor"])
    ls = LocalSearch(problem, random.Random(0))
    start = next(w.params for w in problem.warm_plans() if w.label.startswith("rules"))
    assert ls.score(start)[0] == 1.0
    # Checkpointing every block stashes every block's output: the split balanced for `auto`
    # no longer fits; the split re-planned for the new stage memory does.
    changed = {**start, "plan.recompute": "every_block"}
    assert ls.score(changed)[0] == 0.0
    better = ls.rebalanced(changed, ls.score(changed))
    assert better is not None
    score, params = better
    assert score[0] == 1.0
    assert cuts_of(params, 8) != cuts_of(changed, 8)
    # The climb takes that move from the changed plan.
    assert ls.climb(changed, ls.evals + 2000)[0] >= score


def test_a_replica_change_balances_the_new_stages_in_time() -> None:
    problem = make_problem(compose_cfg("model=resnet152", "system=pod4",
                                       "workload.micro_batch_size=16"))
    ls = LocalSearch(problem, random.Random(0))
    one_stage = ls._structure(ls.random_params(), 4)
    four = ls._structure(one_stage, 1)  # 4 replicas -> 1: four stages
    cuts = cuts_of(four, 4)
    plan = plan_from_config(problem.codec.decode(four).config)
    model = StageCostModel(problem.profile, plan,
                           simulator_block_cycles(problem.profile, problem.system, plan))
    balanced = stage_loads(model, (0, *cuts))
    naive = stage_loads(model, even_split(len(problem.codec.blocks), 4))
    assert max(balanced) < max(naive)  # the slowest stage is faster than the even split's
    assert max(balanced) / min(balanced) < max(naive) / min(naive)


def test_min_max_starts_is_the_exhaustive_min_max_split() -> None:
    rng = random.Random(3)
    for _ in range(30):
        times = [rng.uniform(0.1, 5.0) for _ in range(rng.randint(3, 9))]
        stages = rng.randint(1, len(times))
        n = len(times)

        def slowest(starts: tuple[int, ...], times: list[float] = times) -> float:
            ends = (*starts[1:], len(times))
            return max(sum(times[s:e]) for s, e in zip(starts, ends, strict=True))

        best = min(slowest((0, *c)) for c in itertools.combinations(range(1, n), stages - 1))
        got = min_max_starts(times, stages)
        assert len(got) == stages and got[0] == 0
        assert all(a < b for a, b in itertools.pairwise(got))
        assert slowest(tuple(got)) <= best * (1 + 1e-9)
