"""What `sampler.params` may hold: one table, per sampler, of each argument's type and range.

Optuna checks few of its samplers' arguments when they are made; most fail in the trial that
first uses them, after `n_startup_trials` trials were stored: `gamma=x` is called, a NaN
`prior_weight` reaches NumPy's `choice`, `n_ei_candidates=99999999999` allocates 745 GiB,
`popsize=0` trips an assert of the `cmaes` package. So every argument a config may give is
listed here with its bounds and checked before the sampler is made; an argument of the
sampler that the table does not list (a callable such as `gamma`, an object such as
`independent_sampler`, or one a newer Optuna adds) is refused, never passed on unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ipu_tune.errors import bad_value, bound_text

__all__ = ["PARAMS", "Param", "check_params"]


@dataclass(frozen=True)
class Param:
    """An argument's type (bool, int, float or str) and range; `null` means Optuna's default
    where `nullable`. `above`: the float must be greater than `lo`, not equal to it."""

    kind: type
    lo: float = 0
    hi: float = 0
    nullable: bool = False
    above: bool = False
    choices: tuple[str, ...] = ()
    why: str = ""

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.kind is bool:
            return type(value) is bool
        if self.kind is str:
            return type(value) is str and value in self.choices
        if self.kind is int:
            return type(value) is int and self.lo <= value <= self.hi
        if type(value) not in (int, float) or not math.isfinite(value):
            return False
        return (value > self.lo if self.above else value >= self.lo) and value <= self.hi

    def allowed(self) -> str:
        if self.kind is bool:
            text = "true or false"
        elif self.kind is str:
            text = " or ".join(self.choices)
        elif self.kind is int:
            text = f"an integer in {bound_text(int(self.lo))}..{bound_text(int(self.hi))}"
        else:
            low = f"> {bound_text(self.lo)}" if self.above else f">= {bound_text(self.lo)}"
            text = f"a finite number {low} and <= {bound_text(self.hi)}"
        text += " (or null: Optuna's default)" if self.nullable else ""
        return text + (f"; {self.why}" if self.why else "")


_SWITCH = Param(bool)
_OPT_SWITCH = Param(bool, nullable=True)  # Optuna 5 defaults them to None (deprecated)
# No more startup trials than a study can have trials (`study.n_trials` <= 10^6).
_STARTUP = Param(int, 0, 10**6)
_PROBABILITY = Param(float, 0, 1)

PARAMS: Mapping[str, Mapping[str, Param]] = {
    "tpe": {
        "consider_prior": _OPT_SWITCH,
        # 0 leaves no weight where no trial is yet (NaN weights); its default is 1.
        "prior_weight": Param(float, 0, 1000, nullable=True, above=True),
        "consider_magic_clip": _OPT_SWITCH,
        "consider_endpoints": _OPT_SWITCH,
        "n_startup_trials": _STARTUP,
        # Each draw scores this many candidates per knob (memory and time grow with it);
        # Optuna's default is 24.
        "n_ei_candidates": Param(int, 1, 10_000),
        "multivariate": _OPT_SWITCH,
        "group": _SWITCH,
        "warn_independent_sampling": _OPT_SWITCH,
        "constant_liar": _SWITCH,
        # ipu-tune's own (`HistoryWindow`): fewer than 20 leaves TPE's split too few trials.
        "history": Param(int, 20, 10**6),
    },
    "cmaes": {
        # The space is scaled to 0..1: a larger spread only piles draws on its bounds.
        "sigma0": Param(float, 0, 1, nullable=True, above=True),
        "n_startup_trials": _STARTUP,
        "warn_independent_sampling": _SWITCH,
        "consider_pruned_trials": _SWITCH,
        "restart_strategy": Param(str, nullable=True, choices=("ipop", "bipop")),
        # CMA-ES needs two points a generation to rank (one fails its learning rate).
        "popsize": Param(int, 2, 10_000, nullable=True),
        "inc_popsize": Param(int, -1, 100, why="-1: not set"),
        "use_separable_cma": _SWITCH,
        "with_margin": _SWITCH,
        "lr_adapt": _SWITCH,
    },
    "nsga2": {
        "population_size": Param(int, 2, 10_000),
        "mutation_prob": Param(float, 0, 1, nullable=True),
        "crossover_prob": _PROBABILITY,
        "swapping_prob": _PROBABILITY,
    },
    "gp": {
        "n_startup_trials": _STARTUP,
        "deterministic_objective": _SWITCH,
        "warn_independent_sampling": _SWITCH,
    },
    "random": {},
    "bruteforce": {"avoid_premature_stop": _SWITCH},
}


def check_params(name: str, cls_name: str, params: Mapping[str, Any],
                 accepted: set[str]) -> None:
    """Every entry of `params` is an argument the table lists for sampler `name` and the
    installed Optuna's `cls_name` takes (`accepted`, ipu-tune's `history` besides), within its
    range; else one line naming it and what is allowed."""
    table = PARAMS.get(name, {})
    known = {k for k in table if k in accepted or k == "history"}
    for key, value in params.items():
        full = f"sampler.params.{key}"
        if key not in known:
            if key == "history":
                why = f"TPE only; sampler.name={name!r}"
            elif key == "seed":
                why = "set by sampler.seed"
            elif key in accepted:
                why = (f"a {cls_name} argument a config cannot give (a Python object such as "
                       "a function, or one ipu-tune sets)")
            else:
                why = f"not a {cls_name} argument"
            raise bad_value(full, value, f"{why}; allowed: " + (", ".join(sorted(known))
                                                                 or "none (params: {})"))
        spec = table[key]
        if not spec.ok(value):
            raise bad_value(full, value, f"allowed: {spec.allowed()}")
