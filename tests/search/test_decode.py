"""Decoding parameters into configs: each decode is a new config, the base never changes."""

from __future__ import annotations

import copy
import random

from ipu_tune.config import TuneConfig
from ipu_tune.knobs import get_key, set_key
from ipu_tune.search import LocalSearch
from tests.search._helpers import compose_cfg, make_problem

# Knobs decode derives after setting them: at least the stages when pipelined (PopTorch), and
# PopRun instances fitted to the replicas and servers.
_DERIVED = ("plan.gradient_accumulation", "plan.host_instances")


def test_decoding_sets_every_drawn_knob_and_leaves_the_base_unchanged(
        seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    codec = problem.codec
    before = copy.deepcopy(codec.base)
    search = LocalSearch(problem, random.Random(0))
    decoded = []
    for _ in range(200):
        params = search.random_params()
        cfg = codec.decode(params).config
        decoded.append(cfg)
        for key, spec in codec.knobs.items():
            if key in _DERIVED:
                continue
            expected = copy.deepcopy(codec.base)  # what set_key makes of the same value
            value = params[key]
            set_key(expected, key, round(float(value), 10) if spec.kind == "float" else value)
            assert get_key(cfg, key) == get_key(expected, key), key
    assert codec.base == before
    # Configs share no mutable section: changing one changes no other.
    decoded[0].plan.pipeline.splits.append("x")
    decoded[0].workload.micro_batch_size = -1
    assert all(c.plan.pipeline.splits[-1:] != ["x"] for c in decoded[1:])
    assert all(c.workload.micro_batch_size != -1 for c in decoded[1:])
    assert codec.base == before


def test_per_ipu_proportions_stay_only_where_they_still_describe_the_plan() -> None:
    """A drawn proportion runs on every IPU; with the proportion pinned, the user's per-IPU
    values stay on plans of their stage count and go on the others."""
    overrides = ("system.num_ipus=2", "plan.pipeline.splits=[layer3.8]",
                 "plan.available_memory_proportion_per_ipu=[0.2,0.4]")
    cfg = compose_cfg(*overrides)
    for pinned, kept in (((), 0), (("plan.available_memory_proportion",), 1)):
        problem = make_problem(cfg, pinned=pinned)
        search = LocalSearch(problem, random.Random(0))
        seen = {0: 0, 1: 0}
        for _ in range(100):
            plan = problem.codec.decode(search.random_params()).config.plan
            stages = len(plan.pipeline.splits) + 1
            expected = [0.2, 0.4] if kept and stages == 2 else []
            assert plan.available_memory_proportion_per_ipu == expected
            seen[len(expected) // 2] += 1
        assert seen[kept] > 0  # the case was drawn
