"""The presets end to end on the seed session's setting (+experiment=seed_resnet101)."""

from __future__ import annotations

import copy

import pytest

from ipu_tune.config import TuneConfig
from ipu_tune.search import count_changes
from tests.search._helpers import compose_cfg, make_problem, run_study


def test_experiments_compose_the_seed_settings(seed_cfg: TuneConfig) -> None:
    c = seed_cfg
    model = (c.model.name, c.model.input_shape, c.model.num_classes)
    assert model == ("resnet101", [3, 64, 64], 10)
    assert (c.workload.micro_batch_size, c.workload.optimizer) == (64, "adamw")
    assert (c.system.ipu, c.system.num_ipus) == ("mk2", 2)
    p = c.plan
    assert (p.precision, p.gradient_accumulation, p.device_iterations) == ("32.32", 3, 1)
    assert (p.pipeline.splits, p.pipeline.schedule) == (["layer3.8"], "grouped")
    assert not (p.eight_bit_io or p.async_dataloader or p.offload_optimizer_state)
    m = compose_cfg("+experiment=seed_mnist")
    assert (m.model.name, m.system.num_ipus, m.workload.micro_batch_size) == ("mnist_cnn", 4, 40)
    assert (m.plan.gradient_accumulation, m.plan.device_iterations) == (10, 10)
    assert m.plan.pipeline.splits == ["layer2", "layer3", "layer4"]
    assert m.plan.async_dataloader and m.plan.dataloader_workers == 16


@pytest.mark.parametrize("preset", ["throughput", "memory", "latency", "pareto", "fit"])
def test_every_preset_composes_and_finds_a_feasible_plan(preset: str) -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", f"search={preset}")
    assert cfg.search.name == preset
    problem = make_problem(cfg)
    best = problem.best_trial(run_study(problem, 30))
    assert best is not None


def test_fit_makes_the_seed_plan_fit_with_few_changes_and_the_same_batch(
        seed_cfg: TuneConfig) -> None:
    problem = make_problem(compose_cfg("+experiment=seed_resnet101", "search=fit"))
    user = problem.warm_plans()[0].config
    assert not problem.simulate(user).fits  # the seed's starting point: out of memory
    study = run_study(problem, 40)
    best = problem.best_trial(study)
    assert best is not None
    cfg = problem.config_from_params(best.params)
    result = problem.simulate(cfg)
    assert result.fits
    assert cfg.model == seed_cfg.model
    assert cfg.workload.micro_batch_size == 64
    assert 64 * cfg.plan.gradient_accumulation * cfg.plan.replication_factor == 64 * 3
    changes = count_changes(cfg, user)
    assert 1 <= changes <= 3
    assert best.user_attrs["changes"] == changes
    # Fewest changes first: no fitting trial of the study needed fewer.
    for t in study.trials:
        if all(c <= 0 for c in t.constraints.values()):
            assert t.user_attrs["changes"] >= changes


def test_throughput_beats_the_seeds_hand_tuned_plan(seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    tuned = copy.deepcopy(problem.codec.base)
    p = tuned.plan
    p.precision, p.gradient_accumulation, p.device_iterations = "16.16", 8, 4
    p.eight_bit_io, p.async_dataloader = True, True
    # PopTorch recomputes each stage's forward when pipelining (how the seed ran; see
    # calibration_points.yaml), which this schema calls `checkpoints`.
    p.recompute = "checkpoints"
    hand = problem.simulate(tuned)
    assert hand.fits and hand.throughput > 0  # a real bar, not a plan rated zero
    best = problem.best_trial(run_study(problem, 60))
    assert best is not None
    found = problem.simulate(problem.config_from_params(best.params))
    assert found.fits and found.throughput > hand.throughput


def test_a_knob_either_plan_does_not_run_is_no_change(seed_cfg: TuneConfig) -> None:
    """The partials type of an fp32 plan, or the schedule of a one-stage one, runs nothing:
    moving it is no change for the `fit` preset's count."""
    user = copy.deepcopy(seed_cfg)  # 32.32, two stages
    moved = copy.deepcopy(user)
    moved.plan.partials = "half"
    assert count_changes(moved, user, "image") == 0
    moved.plan.precision = "16.16"  # now the fp16 model runs it
    assert count_changes(moved, user, "image") == 1  # the precision; partials moot in user's
    one = copy.deepcopy(user)
    one.plan.pipeline.splits, one.plan.replication_factor = [], 2
    one.plan.pipeline.schedule = "sharded"
    assert count_changes(one, user, "image") == 2  # splits and replicas, not the schedule
