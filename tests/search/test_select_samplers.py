"""Best-trial rules and the sampler factory."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from ipu_tune.config import SamplerConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.search import SAMPLERS, best_trial, make_sampler, pareto_front, rank_key
from ipu_tune.search._select import is_feasible
from tests.search._helpers import compose_cfg, make_problem, run_study


def _study(directions: list[str], points: list[tuple[list[float], list[float]]]) -> optuna.Study:
    study = optuna.create_study(directions=directions)
    for values, constraints in points:
        study.add_trial(create_trial(
            state=TrialState.COMPLETE, values=values,
            params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)},
            user_attrs={"constraints": constraints},
        ))
    return study


def test_single_objective_best_is_the_best_feasible_value() -> None:
    study = _study(["maximize"], [([5.0], [0.0]), ([9.0], [0.3]), ([7.0], [-0.1]), ([7.0], [-1.0])])
    best = best_trial(study, ["maximize"])
    assert best is not None and best.number == 2  # 9 is infeasible; ties go to the earliest
    low = _study(["minimize"], [([5.0], [-0.2]), ([3.0], [0.0])])
    assert best_trial(low, ["minimize"]).number == 1  # type: ignore[union-attr]


def test_no_feasible_trial_means_no_best() -> None:
    study = _study(["maximize"], [([5.0], [0.1]), ([9.0], [2.0])])
    assert best_trial(study, ["maximize"]) is None
    bare = optuna.create_study()
    bare.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0))
    assert not is_feasible(bare.trials[0])  # no constraint record: not trusted


def test_multi_objective_best_is_the_compromise_of_the_feasible_front() -> None:
    points = [
        ([100.0, 0.05], [0.0]),   # fastest, little headroom
        ([90.0, 0.30], [0.0]),    # the knee: close to both bests
        ([40.0, 0.50], [0.0]),    # most headroom
        ([80.0, 0.20], [0.0]),    # dominated by the knee
        ([200.0, 0.60], [0.5]),   # dominates all but does not fit
    ]
    study = _study(["maximize", "maximize"], points)
    feasible = [t for t in study.trials if is_feasible(t)]
    front = pareto_front(feasible, [1.0, 1.0])
    assert sorted(t.number for t in front) == [0, 1, 2]
    best = best_trial(study, ["maximize", "maximize"])
    assert best is not None and best.number == 1
    # The same order as a key, which also ranks plans no trial holds (the exports' stand-ins).
    key = rank_key(study, ["maximize", "maximize"])
    assert min(feasible, key=lambda t: key(t.values)).number == 1
    assert key([95.0, 0.35]) < key([90.0, 0.30]) < key([100.0, 0.05])
    assert rank_key(study, ["maximize"])([2.0]) < rank_key(study, ["maximize"])([1.0])


@pytest.mark.filterwarnings("ignore:Constraints have been set")  # CMA-ES ignores them
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_every_sampler_preset_builds_and_runs(name: str) -> None:
    cfg = compose_cfg("+experiment=seed_mnist", f"sampler={name}")
    assert cfg.sampler.name == name and cfg.sampler.seed == 0
    problem = make_problem(cfg)
    study = run_study(problem, 12)
    assert len(study.trials) == 12
    assert all(t.state == TrialState.COMPLETE for t in study.trials)


def test_nsga2_runs_the_pareto_preset() -> None:
    problem = make_problem(compose_cfg("+experiment=seed_mnist", "search=pareto",
                                       "sampler=nsga2"))
    assert problem.directions == ["maximize", "maximize"]
    study = run_study(problem, 30)
    best = problem.best_trial(study)
    assert best is not None and best in study.best_trials


def test_same_seed_same_plans() -> None:
    cfg = compose_cfg("+experiment=seed_resnet101")
    runs = [[t.params for t in run_study(make_problem(cfg), 25, warm=False).trials]
            for _ in range(2)]
    assert runs[0] == runs[1]
    other = compose_cfg("+experiment=seed_resnet101", "sampler.seed=1")
    assert [t.params for t in run_study(make_problem(other), 25, warm=False).trials] != runs[0]


def test_bad_sampler_settings_are_user_errors() -> None:
    with pytest.raises(IpuTuneError, match=r"sampler.name='annealing'"):
        make_sampler(SamplerConfig(name="annealing"))
    with pytest.raises(IpuTuneError, match=r"sampler.params.n_startup=.*n_startup_trials"):
        make_sampler(SamplerConfig(name="tpe", params={"n_startup": 5}))
    with pytest.raises(IpuTuneError, match=r"sampler.name='cmaes'.*one objective"):
        make_sampler(SamplerConfig(name="cmaes"), n_objectives=2)


def test_the_default_sampler_draws_conditional_knobs_in_its_joint_pass() -> None:
    """BERT-Large on 16 IPUs: the cuts depend on the stage count and RTS on the replicas. After
    TPE's startup trials no knob is drawn on its own (`sample_independent`) once it has been
    drawn before: the groups of knobs drawn together are modelled jointly (`group: true` in
    conf/sampler/tpe.yaml); a knob no trial has drawn yet (the cut of a stage count drawn for
    the first time) has nothing to model and is drawn alone, as Optuna's group mode does."""
    problem = make_problem(compose_cfg("model=bert_large", "system=pod16",
                                       "workload.micro_batch_size=8"),
                           pinned=["workload.micro_batch_size"])  # as the command line pins it
    sampler = problem.sampler()
    assert isinstance(sampler, optuna.samplers.TPESampler)
    startup = 10  # conf/sampler/tpe.yaml n_startup_trials
    independent: list[tuple[int, str]] = []
    real = sampler.sample_independent

    def counted(study: optuna.Study, trial: optuna.trial.FrozenTrial, name: str,
                dist: optuna.distributions.BaseDistribution) -> object:
        independent.append((trial.number, name))
        return real(study, trial, name, dist)

    sampler.sample_independent = counted  # type: ignore[method-assign]
    study = run_study(problem, 40, sampler=sampler, warm=False)
    params_drawn = sum(len(t.params) for t in study.trials[startup:])
    assert params_drawn > 0
    alone = [(n, name) for n, name in independent if n >= startup]
    assert all(name not in t.params for n, name in alone for t in study.trials[:n]), alone
    assert len(alone) < params_drawn / 20  # joint draws are the rule
    # Startup trials are drawn at random.
    assert {n for n, _ in independent if n < startup} == set(range(startup))
