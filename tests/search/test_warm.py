"""The warm start's plans: the user's plan at the largest micro-batch that fits, and `make_fit`
lowering the micro-batch before it gives up pipelining."""

from __future__ import annotations

import copy

from ipu_tune.search._warm import largest_fitting_micro_batch, warm_start_plans
from tests.search._helpers import compose_cfg, make_problem

_R152_POD4 = ("model=resnet152", "system=pod4", "workload.micro_batch_size=16")


def test_largest_fitting_micro_batch_fits_and_one_more_sample_does_not_on_that_split() -> None:
    problem = make_problem(compose_cfg(*_R152_POD4))
    start = problem.codec.decode({}).config
    found = largest_fitting_micro_batch(problem, start)
    assert found is not None
    mb = found.workload.micro_batch_size
    assert 1 <= mb < start.workload.micro_batch_size
    assert problem.simulate(found).fits
    bigger = copy.deepcopy(start)  # bisected on the plan's own split, then re-balanced
    bigger.workload.micro_batch_size = mb + 1
    assert not problem.simulate(bigger).fits
    labels = [w.label for w in warm_start_plans(problem)]
    assert any(label.startswith("balanced, micro-batch ") for label in labels), labels


def test_a_plan_that_fits_has_no_smaller_micro_batch_to_offer() -> None:
    problem = make_problem(compose_cfg("model=resnet101"))  # the main command's case
    fitting = next(w.config for w in warm_start_plans(problem) if problem.simulate(w.config).fits)
    assert largest_fitting_micro_batch(problem, fitting) is None


def test_make_fit_lowers_the_micro_batch_before_it_gives_up_pipelining() -> None:
    # Micro-batch 20: at 16 the pipelined rules of thumb fit as they are (no I/O tiles).
    problem = make_problem(compose_cfg("model=resnet152", "system=pod4",
                                       "workload.micro_batch_size=20"))
    plans = {w.label: w.config for w in warm_start_plans(problem)}
    fitted = plans["rules of thumb, 4 stages"]  # the seed guide's settings, made to fit
    assert problem.simulate(fitted).fits
    assert fitted.plan.pipeline.schedule != "sharded"
    assert fitted.workload.micro_batch_size < 20


def test_the_rules_of_thumb_give_io_tiles_only_where_they_hide_a_stream() -> None:
    """I/O tiles overlap a stream copy with compute in a program of one stage only; pipelined,
    or with synthetic data (no stream at all), they only take tiles from compute, yet a study
    of three trials picked 32 of them for a synthetic pipelined plan, from this rule."""
    for dataset in ("imagenet", "synthetic"):
        problem = make_problem(compose_cfg("model=resnet50", "system=pod4",
                                           f"model.dataset.name={dataset}"))
        plans = [w.config for w in warm_start_plans(problem)
                 if w.label.startswith("rules of thumb")]
        assert {len(c.plan.pipeline.splits) + 1 for c in plans} >= {1, 4}
        for c in plans:
            one_stage = not c.plan.pipeline.splits
            assert (c.plan.io_tiles > 0) == (one_stage and dataset != "synthetic"), dataset
