"""A bounded history for long studies: the sampler models the recent trials and the best ones.

TPE fits its densities to every finished trial before each draw, so its cost per trial grows
with the study (`benchmarks/tpe_long.py`). `sampler.params.history: N` hands the sampler, for
each draw, a view of the study holding only the last N finished trials, the best N/10 of all
(by the first objective, so the good density keeps the best plans found early), and every
RUNNING trial (the constant liar's). The search space is still inferred from the whole study,
each finished trial shown to it once; the trials themselves are untouched.
"""

from __future__ import annotations

import heapq
from collections.abc import Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

__all__ = ["HistoryWindow"]

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
_BEST_SHARE = 10  # the best history // 10 trials are kept besides the last `history`


class _WindowStudy:
    """The study as the sampler sees it: `_get_trials`/`get_trials`/`trials` read the window;
    everything else is the study's."""

    def __init__(self, study: optuna.Study, kept: list[FrozenTrial]) -> None:
        self._study = study
        self._kept = kept

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None,
                    use_cache: bool = False) -> list[FrozenTrial]:
        return [t for t in self._kept if states is None or t.state in states]

    def get_trials(self, deepcopy: bool = True,
                   states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy, states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return list(self._kept)


class HistoryWindow(BaseSampler):
    def __init__(self, inner: BaseSampler, history: int) -> None:
        self.inner = inner
        self.history = history
        self._last: tuple[int, optuna.Study] | None = None  # (trial id, its view)
        self._fed: set[int] = set()  # finished trials the search space has been shown

    def _view(self, study: optuna.Study, trial: FrozenTrial) -> optuna.Study:
        """The window for `trial`'s draws (built once per trial: its parameters may be drawn
        one by one)."""
        if self._last is not None and self._last[0] == trial._trial_id:
            return self._last[1]
        view = self._window(study)
        self._last = (trial._trial_id, view)
        return view

    def _window(self, study: optuna.Study) -> optuna.Study:
        trials = study._get_trials(deepcopy=False, use_cache=False)
        finished = [t for t in trials if t.state in _FINISHED]
        if len(finished) <= self.history:
            return study
        recent = finished[-self.history:]
        scored = [t for t in finished[:-self.history] if t.values]
        sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
        best = heapq.nsmallest(max(1, self.history // _BEST_SHARE), scored,
                               key=lambda t: sign * t.values[0])
        others = [t for t in trials if t.state not in _FINISHED]
        kept = sorted(best + recent + others, key=lambda t: t.number)
        return _WindowStudy(study, kept)  # type: ignore[return-value]

    def infer_relative_search_space(self, study: optuna.Study,
                                    trial: FrozenTrial) -> dict[str, BaseDistribution]:
        # Optuna's search spaces accumulate what they are shown (the group decomposition adds
        # every finished trial's distributions on each call, a pass over the whole study; the
        # intersection keeps a cursor): show each finished trial once, and the unfinished ones.
        trials = study._get_trials(deepcopy=False, use_cache=False)
        fresh = [t for t in trials if not t.state.is_finished() or t.number not in self._fed]
        self._fed.update(t.number for t in fresh if t.state.is_finished())
        view = _WindowStudy(study, fresh)
        return self.inner.infer_relative_search_space(view, trial)  # type: ignore[arg-type]

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.inner.sample_relative(self._view(study, trial), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.inner.sample_independent(self._view(study, trial), trial, param_name,
                                             param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
