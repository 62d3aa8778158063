"""`sampler.params.history`: TPE draws from the last N finished trials and the best N/10."""

from __future__ import annotations

import optuna
import pytest
from optuna.samplers import BaseSampler, TPESampler
from optuna.trial import FrozenTrial

from ipu_tune.config import SamplerConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.search import HistoryWindow, make_sampler


class _Spy(BaseSampler):
    """Records the finished trials each draw was given (the inner sampler of the window)."""

    def __init__(self) -> None:
        self.seen: list[list[int]] = []
        self._random = optuna.samplers.RandomSampler(seed=0)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict:
        return {}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, space: dict) -> dict:
        return {}

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, name: str,
                           dist: optuna.distributions.BaseDistribution) -> object:
        self.seen.append([t.number for t in study._get_trials(deepcopy=False)
                          if t.state.is_finished()])
        return self._random.sample_independent(study, trial, name, dist)


def test_history_wraps_tpe_and_is_refused_for_other_samplers() -> None:
    sampler = make_sampler(SamplerConfig(name="tpe", params={"history": 200}))
    assert isinstance(sampler, HistoryWindow) and isinstance(sampler.inner, TPESampler)
    assert sampler.history == 200
    with pytest.raises(IpuTuneError, match=r"sampler.params.history=200: TPE only"):
        make_sampler(SamplerConfig(name="random", params={"history": 200}))
    with pytest.raises(IpuTuneError, match=r"sampler.params.history=5: allowed: an integer"):
        make_sampler(SamplerConfig(name="tpe", params={"history": 5}))


def test_the_window_holds_the_last_trials_and_the_best_ones() -> None:
    spy = _Spy()
    study = optuna.create_study(sampler=HistoryWindow(spy, 20), direction="maximize")
    # Trial i scores i, except trials 3 and 7, the best two of all.
    for i in range(60):
        trial = study.ask()
        trial.suggest_float("x", 0, 1)
        study.tell(trial, 1000.0 + i if i in (3, 7) else float(i))
    last = spy.seen[-1]  # the draw of trial 59: 59 finished trials
    assert last == [3, 7, *range(39, 59)]
    assert spy.seen[10] == list(range(10))  # under the bound: every trial
