"""The search reaches the optimum: local refinement, its labelled trials, convergence."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ipu_tune.records import TrialRecord
from ipu_tune.search import LocalSearch, SearchProblem, convergence, refine_study, tell_outcome
from ipu_tune.storage import ResultsStore, open_storage, resolve_storage
from ipu_tune.tuner import run
from tests.search._helpers import compose_cfg, make_problem


def _reference(problem: SearchProblem, starts: int = 8) -> float:
    """Best plan of a multi-start local search over the simulator (not the tool's run: its
    own random starts, another seed, every warm-start plan)."""
    ls = LocalSearch(problem, random.Random(2024))
    begin = [w.params for w in problem.warm_plans()] + [ls.random_params()
                                                         for _ in range(starts)]
    score, _ = max((ls.climb(p, ls.evals + 20_000) for p in begin), key=lambda sp: sp[0])
    assert score[0] == 1.0, "the reference search found no plan that fits"
    return score[1]


def test_default_run_reaches_the_reference_optimum(tmp_path: Path) -> None:
    cfg = compose_cfg("model=resnet101", "search=throughput", f"results_dir={tmp_path}",
                      "study.progress_bar=false", "sampler.seed=0")
    assert cfg.study.n_trials == 100  # the default budget
    summary = run(cfg)
    reference = _reference(make_problem(cfg))
    assert summary.best_result is not None
    assert summary.best_result.throughput >= 0.99 * reference
    # The plan reported is a real trial with its results row, labelled where it came from.
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    best = study.trials[summary.best_trial]  # type: ignore[index]
    assert best.state == TrialState.COMPLETE
    origins = [TrialRecord.of(t).origin for t in study.trials]
    assert any(o.startswith("local search from") for o in origins)
    store = ResultsStore(resolve_storage(None, str(tmp_path)).results_url)
    try:
        rows = store.frame(summary.study_name)
    finally:
        store.close()
    assert summary.best_trial in set(rows["trial_number"])
    assert not study.get_trials(states=(TrialState.WAITING,))  # nothing enqueued past budget
    # Convergence: monotone best-so-far ending at the reported best.
    conv = summary.convergence
    assert conv is not None and conv.last_improved is not None
    values = [v for _, v in conv.history if not math.isnan(v)]
    assert values == sorted(values)
    assert conv.best == best.values[0]  # type: ignore[index]
    assert conv.last_improved == summary.best_trial
    assert conv.trials_since_improvement == 100 - 1 - conv.last_improved
    assert f"from trial {conv.last_improved}" in conv.describe()


def test_refinement_only_enqueues_improvements_and_not_for_baselines() -> None:
    cfg = compose_cfg("model=resnet101", "search=throughput", "study.n_trials=12")
    problem = make_problem(cfg)
    study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
    for params in problem.warm_start():
        study.enqueue_trial(params)
    warm = len(problem.warm_start())
    for _ in range(warm):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        study.tell(trial, outcome.values)
    best_warm = max(t.values[0] for t in study.trials if TrialRecord.of(t).feasible)
    assert refine_study(study, problem, n_trials=warm) == 0  # budget used up: nothing
    added = refine_study(study, problem, n_trials=12)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert added == len(waiting) >= 1
    for t in waiting:  # each a labelled plan at least as fast as the warm start's best
        assert TrialRecord.of(t).origin.startswith("local search from")
    trial = study.ask()
    outcome = problem.run_trial(trial)
    assert outcome.feasible and outcome.values[0] > best_warm
    # The enqueued plan is a full, canonical parameter set (nothing left for the sampler).
    codec = problem.codec
    assert codec.encode(codec.decode(trial.params).config, exact=False) == trial.params



def test_sampler_local_search_switches_the_refinement_for_any_sampler() -> None:
    # The baseline presets turn it off; any sampler may turn it off or on.
    for overrides, refined in ((("sampler=random",), False),
                               (("sampler=tpe", "sampler.local_search=false"), False),
                               (("sampler=random", "sampler.local_search=true"), True),
                               (("sampler=tpe",), True)):
        cfg = compose_cfg("model=resnet101", "search=throughput", *overrides)
        assert (make_problem(cfg).refiner() is not None) is refined, overrides


def test_a_pareto_search_enqueues_labelled_front_plans_in_passes() -> None:
    cfg = compose_cfg("model=resnet101", "search=pareto")
    problem = make_problem(cfg)
    study = optuna.create_study(directions=problem.directions, sampler=problem.sampler())
    for params in problem.warm_start():
        study.enqueue_trial(params)
    for _ in problem.warm_start():
        trial = study.ask()
        study.tell(trial, problem.run_trial(trial).values)
    front_before = _hypervolume(study)
    added = refine_study(study, problem, n_trials=30)
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert added == len(waiting) == 30 - len(problem.warm_start())  # at most the budget
    assert all(TrialRecord.of(t).origin.startswith("Pareto local search") for t in waiting)
    assert any(">=" in TrialRecord.of(t).origin for t in waiting)  # epsilon-constraint climbs
    assert refine_study(study, problem, n_trials=100) == 0  # the queue runs first
    for _ in waiting:
        trial = study.ask()
        study.tell(trial, problem.run_trial(trial).values)
    enqueued = {t.number for t in waiting}
    assert all(TrialRecord.of(t).feasible for t in study.trials if t.number in enqueued)
    assert _hypervolume(study) > 1.5 * front_before
    # Later passes run while the front improves: each adds hypervolume, and they stop.
    for _ in range(20):
        before = _hypervolume(study)
        added = refine_study(study, problem, n_trials=400)
        if added == 0:
            break
        for _ in study.get_trials(states=(TrialState.WAITING,)):
            trial = study.ask()
            study.tell(trial, problem.run_trial(trial).values)
        assert _hypervolume(study) > before
    assert added == 0  # the front stopped improving well within the budget
    assert refine_study(study, problem, n_trials=400) == 0  # and no pass runs again


def _hypervolume(study: optuna.Study) -> float:
    """Area dominated by the feasible trials above (0 samples/s, 0 headroom)."""
    pts = sorted(((t.values[0], t.values[1]) for t in study.trials
                  if t.state == TrialState.COMPLETE and TrialRecord.of(t).feasible),
                 reverse=True)
    area, top = 0.0, 0.0
    for x, y in pts:
        if y > top and x > 0:
            area += x * (y - top)
            top = y
    return area


def _front_reference(problem: SearchProblem, levels: int = 16) -> float:
    """Hypervolume of every plan an epsilon-constraint sweep meets (not the tool's run:
    its own random starts and levels): the fastest plan from warm and random starts, then
    at `levels` headroom levels the fastest plan with at least that headroom."""
    ls = LocalSearch(problem, random.Random(2024))
    seen: list[tuple[tuple[float, ...], dict[str, object]]] = []
    ls.on_feasible = lambda params, values: seen.append((values, params))
    begin = [w.params for w in problem.warm_plans()] + [ls.random_params() for _ in range(4)]
    for p in begin:
        ls.climb(p, ls.evals + 3_000)
    top = max(v[1] for v, _ in seen)
    ls.scales = (1.0, 1.0)
    for i in range(1, levels + 1):
        level = top * i / (levels + 1)
        start = max(((v, p) for v, p in seen if v[1] >= level), key=lambda vp: vp[0][0])[1]
        ls.epsilon = (0, 1, level)
        ls.climb(start, ls.evals + 2_000)
    area, best_y = 0.0, 0.0
    for x, y in sorted(((v[0], v[1]) for v, _ in seen), reverse=True):
        if y > best_y and x > 0:
            area += x * (y - best_y)
            best_y = y
    return area


def test_default_pareto_run_reaches_the_reference_front(tmp_path: Path) -> None:
    cfg = compose_cfg("model=resnet101", "search=pareto", f"results_dir={tmp_path}",
                      "study.progress_bar=false", "sampler.seed=0")
    assert cfg.study.n_trials == 100  # the default budget
    summary = run(cfg)
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    assert _hypervolume(study) >= 0.99 * _front_reference(make_problem(cfg))
    origins = [TrialRecord.of(t).origin for t in study.trials]
    assert sum(o.startswith("Pareto local search") for o in origins) >= 20
    assert not study.get_trials(states=(TrialState.WAITING,))  # nothing enqueued past budget


def test_convergence_of_a_pareto_study_is_its_hypervolume() -> None:
    cfg = compose_cfg("model=resnet101", "search=pareto")
    problem = make_problem(cfg)
    study = optuna.create_study(directions=problem.directions,
                                sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(15):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        study.tell(trial, outcome.values)
    conv = convergence(study, problem.directions, problem.objective_names)
    assert conv.measure == "hypervolume"
    assert conv.unit == "(samples/s x fraction of IPU SRAM, from the worst feasible point)"
    assert conv.unit in conv.describe()
    assert len(conv.history) == 15
    values = [v for _, v in conv.history if not math.isnan(v)]
    assert values == sorted(values)


def test_escapes_go_on_after_a_failed_round_each_after_twice_the_wait() -> None:
    problem = make_problem(compose_cfg("model=resnet101", "search=throughput", "sampler.seed=3"))
    study = optuna.create_study(direction="maximize", sampler=problem.sampler())
    for params in problem.warm_start():
        study.enqueue_trial(params)
    for _ in range(100):
        trial = study.ask()
        tell_outcome(study, trial, problem.run_trial(trial))
        refine_study(study, problem, 100)
    refiner = problem.refiner()
    assert refiner is not None
    rounds = refiner.escape_rounds
    best = problem.best_trial(study)
    assert best is not None
    # The optimum is found early; the rounds of escapes that follow find nothing better, and
    # they go on (not one round per best): 15 trials after the best, then 30 after that.
    assert len(rounds) >= 2 and refiner.rounds == len(rounds)
    assert rounds[0] - best.number >= 15
    assert all(b - a >= 15 << i for i, (a, b) in enumerate(itertools.pairwise(rounds), 1))
