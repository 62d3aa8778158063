"""Optuna samplers from `cfg.sampler` (name, seed, params), seeded for reproducibility."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.config import SamplerConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.records import native_constraints, user_attr_constraints
from ipu_tune.search._history import HistoryWindow
from ipu_tune.search._sampler_params import check_params

__all__ = ["SAMPLERS", "AskTellBruteForceSampler", "make_sampler"]

class AskTellBruteForceSampler(optuna.samplers.BruteForceSampler):
    """`BruteForceSampler` that survives the runner's ask-and-tell loop.

    Optuna's version calls `Study.stop()` once the space is exhausted, which raises outside
    `Study.optimize`; here the study simply goes on (later trials repeat visited points).
    """

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        try:
            super().after_trial(study, trial, state, values)
        except RuntimeError as exc:
            if "Study.stop" not in str(exc):
                raise


SAMPLERS: dict[str, type[optuna.samplers.BaseSampler]] = {
    "tpe": optuna.samplers.TPESampler,
    "random": optuna.samplers.RandomSampler,
    "cmaes": optuna.samplers.CmaEsSampler,
    "nsga2": optuna.samplers.NSGAIISampler,
    "gp": optuna.samplers.GPSampler,
    "bruteforce": AskTellBruteForceSampler,
}
_SINGLE_OBJECTIVE = ("cmaes",)


def make_sampler(cfg: SamplerConfig, n_objectives: int = 1) -> optuna.samplers.BaseSampler:
    """The sampler `cfg.name` with `cfg.seed` and `cfg.params` as keyword arguments.

    Constraints reach the samplers that use them (TPE, NSGA-II, GP) from the trial itself
    (Optuna >= 5, `Trial.set_constraint`); with an older Optuna they come through
    `constraints_func` from the trial's ``constraints`` user attribute.
    """
    if cfg.name not in SAMPLERS:
        raise bad_value("sampler.name", cfg.name, "allowed: " + ", ".join(SAMPLERS), SAMPLERS)
    if cfg.name in _SINGLE_OBJECTIVE and n_objectives > 1:
        raise bad_value("sampler.name", cfg.name,
                        f"optimises one objective; this search has {n_objectives}: use nsga2, "
                        "tpe, gp or random")
    if cfg.name == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:
            raise IpuTuneError(
                "sampler.name='cmaes': needs the `cmaes` package (pip install cmaes)"
            ) from None
    cls = SAMPLERS[cfg.name]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    params = dict(cfg.params)
    check_params(cfg.name, cls.__name__, params, accepted)
    history = params.pop("history", None)
    kwargs: dict[str, Any] = {"seed": cfg.seed, **params}
    if not native_constraints() and "constraints_func" in accepted:
        kwargs["constraints_func"] = user_attr_constraints
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        try:
            sampler = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise IpuTuneError(f"sampler.params: {exc}") from None
    return sampler if history is None else HistoryWindow(sampler, history)
