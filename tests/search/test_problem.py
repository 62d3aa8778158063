"""SearchProblem against the real profiler and simulator: validity, pins, batch, feasibility."""

from __future__ import annotations

import itertools
from typing import Any

import optuna
import pytest

from ipu_tune.config import EvalConfig, TuneConfig
from ipu_tune.config._validate import valid_io_tiles, validate
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config, stage_starts
from ipu_tune.records import TrialRecord
from ipu_tune.search import SearchProblem, TrialOutcome, parse_space
from tests.search._helpers import compose_cfg, make_problem, run_study


def _collect(problem: SearchProblem, n: int, seed: int = 0) -> list[tuple[Any, TrialOutcome]]:
    seen: list[tuple[Any, TrialOutcome]] = []
    run_study(problem, n, sampler=optuna.samplers.RandomSampler(seed=seed),
              on_outcome=lambda t, o: seen.append((t, o)))
    return seen


def _assert_valid(cfg: EvalConfig, problem: SearchProblem) -> None:
    validate(cfg)
    starts = stage_starts(plan_from_config(cfg), problem.profile)
    assert all(a < b for a, b in itertools.pairwise(starts))
    p = cfg.plan
    assert valid_io_tiles(p.io_tiles)
    assert (len(p.pipeline.splits) + 1) * p.replication_factor == cfg.system.num_ipus
    assert not p.replicated_tensor_sharding or p.replication_factor >= 2


@pytest.mark.parametrize("overrides", [
    ("+experiment=seed_resnet101",),
    ("model=resnet50", "system=pod16", "workload.micro_batch_size=16"),
    ("+experiment=seed_mnist", "search=pareto"),
])
def test_every_sampled_plan_is_valid(overrides: tuple[str, ...]) -> None:
    problem = make_problem(compose_cfg(*overrides))
    outcomes = _collect(problem, 60)
    structures = set()
    for trial, out in outcomes:
        _assert_valid(out.config, problem)
        assert out.config == problem.config_from_params(trial.params)
        structures.add((out.config.plan.replication_factor, tuple(out.config.plan.pipeline.splits)))
    assert len(structures) >= 5  # the structure is searched, not stuck (MNIST has 5 in all)


def test_pinned_knobs_are_never_searched(seed_cfg: TuneConfig) -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "search=pareto",
                      "plan.precision=16.32", "workload.micro_batch_size=48")
    pins = ("plan.precision", "workload.micro_batch_size", "plan.pipeline")
    problem = make_problem(cfg, pinned=pins)
    names = problem.codec.param_names
    assert not [n for n in names if n.startswith(pins)]
    for _, out in _collect(problem, 40):
        assert out.config.plan.precision == "16.32"
        assert out.config.workload.micro_batch_size == 48
        assert out.config.plan.pipeline.splits == ["layer3.8"]
        assert out.config.plan.pipeline.schedule == "grouped"
        assert out.config.plan.replication_factor == 1  # 2 stages on 2 IPUs
    unpinned = make_problem(cfg)
    assert "workload.micro_batch_size" in unpinned.codec.param_names


def test_fixed_global_batch_derives_gradient_accumulation() -> None:
    cfg = compose_cfg("model=resnet50", "system=pod16", "workload.micro_batch_size=16",
                      "search.global_batch_size=1024")
    problem = make_problem(cfg)
    assert "plan.gradient_accumulation" not in problem.codec.param_names
    assert "global_batch" in problem.constraint_names
    for _, out in _collect(problem, 50):
        p = out.config.plan
        assert out.config.workload.micro_batch_size * p.gradient_accumulation \
            * p.replication_factor == 1024
        assert out.constraints[problem.constraint_names.index("global_batch")] == 0


def test_searched_micro_batch_divides_the_global_batch_and_stays_at_or_below_yours() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "search=pareto",
                      "search.global_batch_size=512")
    problem = make_problem(cfg)
    index = problem.constraint_names.index("global_batch")
    drawn = set()
    for _, out in _collect(problem, 60):
        p, w = out.config.plan, out.config.workload
        drawn.add(w.micro_batch_size)
        assert 512 % w.micro_batch_size == 0 and w.micro_batch_size <= 64
        batch = w.micro_batch_size * p.gradient_accumulation * p.replication_factor
        if batch == 512:
            assert out.constraints[index] == 0
        else:  # only PopTorch's floor (GA >= stages when pipelined) can change it
            assert out.constraints[index] > 0 and not out.feasible
            assert p.gradient_accumulation == len(p.pipeline.splits) + 1
    assert len(drawn) > 1  # the micro-batch is searched


def test_searched_micro_batch_without_a_global_batch_never_exceeds_yours() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "workload.micro_batch_size=24")
    problem = make_problem(cfg)
    sizes = {out.config.workload.micro_batch_size for _, out in _collect(problem, 40)}
    assert max(sizes) <= 24 and len(sizes) > 1


def test_the_users_accumulation_and_iterations_are_drawable_beyond_the_presets_range() -> None:
    """The throughput preset draws GA and DI from 1..64; a plan run at GA 512 and DI 1000 (an
    `ipu_config.json`, a pipelined BERT) keeps its values in reach instead of only losing them."""
    cfg = compose_cfg("+experiment=seed_resnet101", "plan.gradient_accumulation=512",
                      "plan.device_iterations=1000")
    knobs = make_problem(cfg).codec.knobs
    ga, di = knobs["plan.gradient_accumulation"], knobs["plan.device_iterations"]
    assert (ga.low, ga.high, di.low, di.high) == (1, 512, 1, 1000)
    assert ga.log and di.log  # the preset's log scale stays
    inside = make_problem(compose_cfg("+experiment=seed_resnet101")).codec.knobs
    assert inside["plan.gradient_accumulation"].high == 64  # values inside leave it alone
    assert inside["plan.available_memory_proportion"].step == 0.05  # float grids stay


def test_throughput_searches_the_partials_type_in_inference_only() -> None:
    """Inference runs with half partials (Graphcore's inference benchmarks); in training the
    partials type is the user's numerics choice. Pinned, it is never searched."""
    infer = make_problem(compose_cfg("+experiment=seed_resnet101", "workload.mode=infer"))
    assert infer.codec.conditional["plan.partials"].choices == ("float", "half")
    train = make_problem(compose_cfg("+experiment=seed_resnet101"))
    assert "plan.partials" not in train.codec.knobs | train.codec.conditional
    pinned = make_problem(compose_cfg("+experiment=seed_resnet101", "workload.mode=infer",
                                      "plan.partials=float"), pinned=["plan.partials"])
    assert "plan.partials" not in pinned.codec.knobs | pinned.codec.conditional
    drawn = {out.config.plan.partials for _, out in _collect(infer, 24)
             if out.config.plan.precision == "16.16"}
    assert drawn == {"float", "half"}


def test_the_partials_type_is_drawn_only_for_an_fp16_model() -> None:
    """fp32 arithmetic accumulates in fp32 whatever the partials type: a trial of a 32.32 or
    16.32 plan draws none and keeps the user's; with the precision pinned to 32.32 the
    partials type is not searched at all."""
    cfg = compose_cfg("+experiment=seed_resnet101", "workload.mode=infer", "plan.partials=float")
    problem = make_problem(cfg)
    seen = _collect(problem, 30)
    for trial, out in seen:
        fp16 = out.config.plan.precision.endswith(".16")
        assert ("plan.partials" in trial.params) == fp16, (out.config.plan.precision, trial.params)
        if not fp16:
            assert out.config.plan.partials == "float"
    assert {out.config.plan.precision for _, out in seen} >= {"16.16", "32.32"}
    fp32 = make_problem(compose_cfg("+experiment=seed_resnet101", "workload.mode=infer",
                                    "plan.precision=32.32"), pinned=["plan.precision"])
    assert not fp32.searches("plan.partials", "half")
    assert "plan.partials" not in fp32.codec.param_names
    # The grid enumerates the partials type with each fp16 precision only.
    small = make_problem(cfg, pinned=["plan.pipeline", "plan.replication_factor"],
                         space=parse_space({"knobs": {"plan.precision": None,
                                                      "plan.partials": None}}))
    grid = list(small.codec.grid())
    assert len(grid) == small.codec.grid_size() == 2 + 2
    assert all(("plan.partials" in g) == g["plan.precision"].endswith(".16") for g in grid)


def test_searches_answers_for_the_fitted_space_not_the_space_file() -> None:
    """What `explain` marks as searched is what the study could draw: the micro-batch at or
    below the user's, the partials type in inference only, image knobs for images only, GA not
    at all once a global batch derives it, nothing pinned."""
    train = make_problem(compose_cfg("+experiment=seed_resnet101",
                                     "workload.micro_batch_size=24"))
    mb = "workload.micro_batch_size"
    assert train.searches(mb, 12) and train.searches(mb, 24) and not train.searches(mb, 48)
    assert not train.searches("plan.partials", "half")
    infer = make_problem(compose_cfg("+experiment=seed_resnet101", "workload.mode=infer"))
    assert infer.searches("plan.partials", "half")
    tokens = make_problem(compose_cfg("model=bert_base"))
    assert not tokens.searches("plan.eight_bit_io", True)
    fixed = make_problem(compose_cfg("+experiment=seed_resnet101", "search.global_batch_size=512"))
    assert not fixed.searches("plan.gradient_accumulation", 8)
    pinned = make_problem(compose_cfg("+experiment=seed_resnet101", "plan.device_iterations=4"),
                          pinned=["plan.device_iterations"])
    assert not pinned.searches("plan.device_iterations", 8)
    assert train.searches("plan.device_iterations", 8)


def test_a_global_batch_no_plan_can_reach_is_a_user_error() -> None:
    # With the micro-batch pinned at 64, no replica count reaches 100.
    cfg = compose_cfg("+experiment=seed_resnet101", "search.global_batch_size=100")
    with pytest.raises(IpuTuneError, match=r"search.global_batch_size=100"):
        make_problem(cfg, pinned=["workload.micro_batch_size"])


def test_a_global_batch_the_searched_micro_batch_reaches_is_not_an_error() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "search.global_batch_size=100")
    problem = make_problem(cfg)  # micro-batch 50, 25, 20, ... x GA x replicas = 100
    for _, out in _collect(problem, 20):
        w = out.config.workload
        assert 100 % w.micro_batch_size == 0 and w.micro_batch_size <= 64


def test_out_of_memory_plans_are_infeasible_with_a_reason(seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    user = problem.warm_plans()[0]
    assert user.label == "user"
    out = problem.evaluate(user.config)
    assert not out.result.fits and out.constraints[0] > 0 and not out.feasible
    assert out.reason.startswith("IPU1 (stage 1)")  # the IPU furthest over its limits
    outcomes = _collect(problem, 60)
    fitting = [o for _, o in outcomes if o.result.fits]
    assert fitting and all(o.feasible and o.reason == "" for o in fitting)
    assert all(o.constraints[0] > 0 and o.reason for _, o in outcomes if not o.result.fits)


def test_constraints_reach_the_trial_and_the_best_trial_is_feasible(seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    study = run_study(problem, 30)
    for t in study.trials:
        assert list(t.constraints) == problem.constraint_names
        assert "constraints" not in t.user_attrs  # stored once, natively on Optuna 5
        assert TrialRecord.of(t).constraints == list(t.constraints.values())
    best = problem.best_trial(study)
    assert best is not None and all(c <= 0 for c in best.constraints.values())
    fitting = [t.values[0] for t in study.trials if all(c <= 0 for c in t.constraints.values())]
    assert best.values[0] == max(fitting)


def test_warm_start_plans_are_valid_and_start_with_the_users_plan(seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    plans = problem.warm_plans()
    labels = [wp.label for wp in plans]
    assert labels[0] == "user" and "balanced" in labels
    assert any(label.startswith("rules of thumb") for label in labels)
    user = plans[0].config
    assert user.plan == seed_cfg.plan and user.workload == seed_cfg.workload
    for wp in plans:
        _assert_valid(wp.config, problem)
        assert problem.config_from_params(wp.params) == wp.config
    # Optuna takes every enqueued value as is (plans with equal params are enqueued once).
    study = run_study(problem, len(problem.warm_start()))
    for trial, params in zip(study.trials, problem.warm_start(), strict=True):
        assert trial.params == params


def test_rules_of_thumb_follow_the_seed_guide(seed_cfg: TuneConfig) -> None:
    problem = make_problem(seed_cfg)
    rules = next(wp.config for wp in problem.warm_plans()
                 if wp.label == "rules of thumb, 2 stages")
    p = rules.plan
    assert p.precision == "16.16" and p.prefetch_depth == 3
    assert p.eight_bit_io and p.async_dataloader and p.dataloader_workers == 16
    # Pipelined, I/O tiles hide no copy (PopTorch refuses overlapped I/O with a pipeline):
    # they would only take tiles from compute.
    assert p.io_tiles == 0
    assert p.gradient_accumulation >= 8 and p.device_iterations >= 4
    one = next(wp.config for wp in problem.warm_plans()
               if wp.label == "rules of thumb, 1 stages")
    # N_IO ~ 1.05 x 64 x 3x64x64 bytes / 624 KiB ~ 1.3 tiles: the smallest allowed count.
    assert one.plan.io_tiles == 32


def test_latency_preset_runs_inference_and_refuses_a_pinned_train_mode() -> None:
    problem = make_problem(compose_cfg("+experiment=seed_resnet101", "search=latency"))
    assert problem.directions == ["minimize"]
    for _, out in _collect(problem, 20):
        assert out.config.workload.mode == "infer"
        assert out.config.plan.gradient_accumulation == 1
        assert out.values[0] == out.result.latency_s  # the whole call's
    cfg = compose_cfg("+experiment=seed_resnet101", "search=latency", "workload.mode=train")
    with pytest.raises(IpuTuneError, match=r"workload.mode"):
        make_problem(cfg, pinned=["workload.mode"])


def test_memory_preset_has_a_throughput_floor(seed_cfg: TuneConfig) -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "search=memory")
    problem = make_problem(cfg)
    assert problem.constraint_names == ["memory", "throughput_floor"]
    assert problem.throughput_floor == pytest.approx(0.5 * problem.reference_throughput())
    assert problem.throughput_floor > 0
    index = problem.constraint_names.index("throughput_floor")
    for _, out in _collect(problem, 40):
        slow = out.result.throughput < problem.throughput_floor
        assert (out.constraints[index] > 0) == slow
        if slow:
            assert "below the floor" in out.reason
    absolute = make_problem(compose_cfg("+experiment=seed_resnet101", "search=memory",
                                        "search.throughput_floor=1234"))
    assert absolute.throughput_floor == 1234


def test_unknown_objective_is_a_user_error() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101", "search.objectives=[speed]")
    with pytest.raises(IpuTuneError, match=r"search.objectives='speed'"):
        make_problem(cfg)


def test_a_knob_outside_the_space_keeps_the_users_value(seed_cfg: TuneConfig) -> None:
    space = parse_space({"knobs": {"plan.device_iterations": {"low": 1, "high": 8}}})
    problem = make_problem(seed_cfg, space=space)
    assert problem.codec.param_names == ["plan.device_iterations"]
    for _, out in _collect(problem, 10):
        plan = out.config.plan
        assert (plan.precision, plan.gradient_accumulation) == ("32.32", 3)
        assert plan.pipeline.splits == ["layer3.8"]


def test_bruteforce_sampler_enumerates_a_small_space(seed_cfg: TuneConfig) -> None:
    space = parse_space({"knobs": {"plan.precision": None, "plan.eight_bit_io": None,
                                   "plan.replication_factor": None,
                                   "plan.pipeline.splits": {"step": 8}}})
    cfg = compose_cfg("+experiment=seed_resnet101", "sampler=bruteforce")
    problem = make_problem(cfg, space=space)
    size = problem.codec.grid_size(distinct_splits=False)
    assert size == len(list(problem.codec.grid(distinct_splits=False))) == 3 * 2 * (5 + 1)
    study = run_study(problem, size + 3, warm=False)
    seen = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(seen) == size
    assert profile_model(cfg.model).blocks == problem.codec.blocks


def test_pipelined_training_plans_keep_gradient_accumulation_at_least_the_stages() -> None:
    """PopTorch's compile-time rule (GA >= pipeline stages when pipelined): the codec never
    decodes a plan that breaks it, whatever the sampler drew."""
    from ipu_tune.case import build_system
    from ipu_tune.config import TuneConfig
    from ipu_tune.models import profile_model
    from ipu_tune.search import SearchProblem

    cfg = TuneConfig()
    cfg.system.num_ipus = 4
    problem = SearchProblem(cfg, profile_model(cfg.model), build_system(cfg))
    decoded = problem.codec.decode({"plan.gradient_accumulation": 1})
    plan = decoded.config.plan
    stages = len(plan.pipeline.splits) + 1
    assert stages > 1
    assert plan.gradient_accumulation >= stages


def test_small_throughputs_are_shown_with_three_significant_digits() -> None:
    from ipu_tune.search import show_value

    assert show_value("throughput", 2.6789) == "2.68 samples/s"  # not "3 samples/s"
    assert show_value("throughput", 16866.2) == "16,866 samples/s"


def test_pinned_per_ipu_proportions_are_kept_by_every_trial() -> None:
    """A per-IPU list set on the command line is pinned: before, the search drew the one
    proportion, which replaced the list in every trial (a sweep of two lists ran one study
    twice, the best plan showed `AMP per IPU []`)."""
    per_ipu = "plan.available_memory_proportion_per_ipu"
    cfg = compose_cfg("model=mnist_cnn", f"{per_ipu}=[0.2,0.3]", "plan.pipeline.splits=[layer3]",
                      "plan.gradient_accumulation=4")
    problem = make_problem(cfg, pinned=(per_ipu, "plan.pipeline.splits",
                                        "plan.gradient_accumulation"))
    assert "plan.available_memory_proportion" not in problem.codec.knobs
    for _, outcome in _collect(problem, 12):
        assert outcome.config.plan.available_memory_proportion_per_ipu == [0.2, 0.3]


def test_synthetic_data_leaves_the_host_pipeline_unsearched() -> None:
    """Data made on the IPU has no loader and no stream: a search that drew prefetch, 8-bit I/O,
    the loader or PopRun instances spent trials on knobs that change nothing."""
    from ipu_tune.knobs import KNOBS, describe

    host = [k for k in KNOBS if {"stream", "loader"} & set(k.needs)]
    assert {k.key for k in host} == {"plan.prefetch_depth", "plan.eight_bit_io",
                                     "plan.async_dataloader", "plan.dataloader_workers",
                                     "plan.host_instances"}
    for dataset, searched in (("imagenet", True), ("synthetic", False)):
        cfg = compose_cfg("model=resnet50", "system=pod4", f"model.dataset.name={dataset}")
        problem = make_problem(cfg)
        assert all(problem.searches(k.key, v) == searched
                   for k in host for v in (k.domain or (2,))[-1:]), dataset
        line = describe(problem.codec.user)
        assert ("prefetch" in line) == searched and ("8-bit I/O" in line) == searched
    from ipu_tune.knobs import get_key

    r = make_problem(compose_cfg("model=resnet50", "system=pod4", "model.dataset.name=synthetic"))
    for _, out in _collect(r, 10):  # every trial keeps the user's host settings
        assert all(get_key(out.config, k.key) == get_key(r.codec.user, k.key) for k in host)


def test_a_pinned_accumulation_is_refused_by_a_space_that_runs_inference() -> None:
    """`search=latency plan.gradient_accumulation=8` ran with GA 1 in silence, while every
    other way of asking for accumulated inference is refused."""
    cfg = compose_cfg("search=latency", "plan.gradient_accumulation=8")
    with pytest.raises(IpuTuneError, match=r"^plan.gradient_accumulation=8: must be 1 for infer"):
        make_problem(cfg, pinned=["plan.gradient_accumulation"])
    make_problem(cfg)  # the file's own GA, not pinned: the space sets it to 1


def test_a_tied_head_on_ipu0_counts_as_a_pipeline_stage_of_its_own() -> None:
    """BERT's `cls` runs on IPU0 after the last stage: with PopTorch's AutoIncrement (the
    exports) that is one more pipeline stage, and GA must be at least stages + 1."""
    from ipu_tune.case import build_system, head_stages
    from ipu_tune.search import SearchProblem

    cfg = compose_cfg("model=bert_base", "system.num_ipus=4", "plan.gradient_accumulation=1")
    problem = SearchProblem(cfg, profile_model(cfg.model), build_system(cfg))
    decoded = problem.codec.decode({"plan.gradient_accumulation": 1})
    cfg_out = decoded.config
    stages = len(cfg_out.plan.pipeline.splits) + 1
    assert stages == 4 and head_stages(problem.profile, cfg_out) == 1
    assert cfg_out.plan.gradient_accumulation >= stages + 1
    resnet = compose_cfg("model=resnet50", "system.num_ipus=4")
    assert head_stages(profile_model(resnet.model), resnet) == 0  # no tied head
