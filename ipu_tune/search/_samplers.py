"""Optuna samplers from `cfg.sampler` (name, seed, params), seeded for reproducibility."""

from __future__ import annotations

import inspect
import math
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
        raise bad_value("sampler.name", cfg.name, "allowed: " + ", ".join(SAMPLERS))
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
    signature = inspect.signature(cls.__init__).parameters
    accepted = set(signature) - {"self"}
    kwargs: dict[str, Any] = {"seed": cfg.seed}
    params = dict(cfg.params)
    history = _history(cfg.name, params.pop("history", None))
    for key, value in params.items():
        if key not in accepted or key in ("seed", "constraints_func"):
            allowed = sorted(accepted - {"seed", "constraints_func"})
            raise bad_value(f"sampler.params.{key}", value,
                            f"not a {cls.__name__} argument; allowed: " + ", ".join(allowed))
        _check_param(key, value, signature[key].default)
        kwargs[key] = value
    if not native_constraints() and "constraints_func" in accepted:
        kwargs["constraints_func"] = user_attr_constraints
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        try:
            sampler = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise IpuTuneError(f"sampler.params: {exc}") from None
    return sampler if history is None else HistoryWindow(sampler, history)


_SIZES = frozenset({"n_ei_candidates", "population_size"})


def _check_param(key: str, value: Any, default: Any) -> None:
    """A sampler argument of the kind of its default: Optuna's samplers check few of their
    arguments when made, and a string where a count belongs ends a later trial in a traceback
    (`n_startup_trials=abc` fails at the first comparison, after the study was written)."""
    kind = type(default)
    if kind is bool:
        ok, allowed = type(value) is bool, "true or false"
    elif kind is int:
        # Sizes Optuna divides by or draws that many of (TPE with no candidate fails at its
        # first model); CMA-ES's inc_popsize is -1 for "not set".
        least = 1 if key in _SIZES else min(default, 0)
        ok, allowed = type(value) is int and value >= least, f"an integer >= {least}"
    elif kind is float:
        ok = type(value) in (int, float) and math.isfinite(value) and value >= 0
        allowed = "a finite number >= 0"
    else:  # None or a callable by default: Optuna checks what it takes
        return
    if not ok:
        raise bad_value(f"sampler.params.{key}", value, f"allowed: {allowed} (as its default, "
                                                         f"{default!r})")


def _history(name: str, value: Any) -> int | None:
    """`sampler.params.history`: TPE models the last N finished trials and the best N/10."""
    if value is None:
        return None
    if name != "tpe":
        raise bad_value("sampler.params.history", value, f"TPE only; sampler.name={name!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 20:
        raise bad_value("sampler.params.history", value, "allowed: an integer >= 20")
    return value
