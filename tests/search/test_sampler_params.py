"""`sampler.params`: every argument checked against one table before the sampler is made."""

from __future__ import annotations

import inspect
import math
import warnings
from typing import Any

import pytest

from ipu_tune.config import SamplerConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.search import SAMPLERS, make_sampler
from ipu_tune.search._sampler_params import PARAMS


def test_the_table_lists_only_arguments_of_the_installed_samplers() -> None:
    """A table entry Optuna no longer takes would be refused as unknown: the table rots
    visibly, here, not at a user's run."""
    assert set(PARAMS) == set(SAMPLERS)
    for name, table in PARAMS.items():
        accepted = set(inspect.signature(SAMPLERS[name].__init__).parameters)
        assert set(table) - {"history"} <= accepted, name


def _bounds(name: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, spec in PARAMS[name].items():
        if spec.kind is bool:
            out += [(key, True), (key, False)]
        elif spec.kind is str:
            out += [(key, c) for c in spec.choices]
        elif spec.kind is int:
            out += [(key, int(spec.lo)), (key, int(spec.hi))]
        else:
            out += [(key, math.nextafter(spec.lo, 1) if spec.above else spec.lo),
                    (key, spec.hi)]
        if spec.nullable:
            out.append((key, None))
    return out


@pytest.mark.parametrize(("name", "key", "value"),
                         [(n, k, v) for n in PARAMS for k, v in _bounds(n)])
def test_every_value_the_table_allows_makes_its_sampler(name: str, key: str, value: Any) -> None:
    if name == "cmaes":
        pytest.importorskip("cmaes")
    with warnings.catch_warnings():  # Optuna deprecates some of them: still taken
        warnings.simplefilter("ignore")
        make_sampler(SamplerConfig(name=name, params={key: value}))


@pytest.mark.parametrize(("name", "params", "message"), [
    # Callables and objects cannot come from a config: before, `gamma=x` was called after
    # the startup trials (TypeError 'str' object is not callable).
    ("tpe", {"gamma": "x"}, "sampler.params.gamma='x': a TPESampler argument a config cannot"),
    ("tpe", {"weights": "x"}, "sampler.params.weights='x': a TPESampler argument a config"),
    ("gp", {"independent_sampler": "random"}, "sampler.params.independent_sampler='random'"),
    ("cmaes", {"x0": {"a": 1}}, "sampler.params.x0={'a': 1}: a CmaEsSampler argument"),
    ("nsga2", {"mutation": "x"}, "sampler.params.mutation='x': a NSGAIISampler argument"),
    ("tpe", {"seed": 3}, "sampler.params.seed=3: set by sampler.seed"),
    ("random", {"foo": 1}, "sampler.params.foo=1: not a RandomSampler argument; allowed: none"),
    ("gp", {"history": 30}, "sampler.params.history=30: TPE only"),
    # Ranges Optuna checks late or never: NaN weights, a 745 GiB draw, cmaes' asserts.
    ("tpe", {"prior_weight": -1}, "sampler.params.prior_weight=-1: allowed: a finite number >"
                                  " 0 and <= 1000"),
    ("tpe", {"prior_weight": math.nan}, "sampler.params.prior_weight=nan: allowed: a finite"),
    ("tpe", {"prior_weight": 0}, "sampler.params.prior_weight=0: allowed: a finite number > 0"),
    ("tpe", {"n_ei_candidates": 99999999999},
     "sampler.params.n_ei_candidates=99999999999: allowed: an integer in 1..10,000"),
    ("tpe", {"n_startup_trials": -5}, "sampler.params.n_startup_trials=-5: allowed: an integer "
                                      "in 0..1,000,000"),
    ("tpe", {"n_startup_trials": 1.5}, "sampler.params.n_startup_trials=1.5: allowed: an int"),
    ("tpe", {"history": 3}, "sampler.params.history=3: allowed: an integer in 20..1,000,000"),
    ("tpe", {"multivariate": "yes"}, "sampler.params.multivariate='yes': allowed: true or false"),
    ("cmaes", {"sigma0": math.nan}, "sampler.params.sigma0=nan: allowed: a finite number > 0"),
    ("cmaes", {"sigma0": 0.0}, "sampler.params.sigma0=0.0: allowed: a finite number > 0"),
    ("cmaes", {"popsize": 0}, "sampler.params.popsize=0: allowed: an integer in 2..10,000"),
    ("cmaes", {"popsize": 1}, "sampler.params.popsize=1: allowed: an integer in 2..10,000"),
    ("cmaes", {"restart_strategy": "x"}, "sampler.params.restart_strategy='x': allowed: ipop "
                                         "or bipop"),
    ("nsga2", {"population_size": 1}, "sampler.params.population_size=1: allowed: an integer "
                                      "in 2..10,000"),
    ("nsga2", {"crossover_prob": 2.0}, "sampler.params.crossover_prob=2.0: allowed: a finite "
                                       "number >= 0 and <= 1"),
    ("gp", {"n_startup_trials": -1}, "sampler.params.n_startup_trials=-1: allowed: an integer"),
])
def test_a_bad_sampler_argument_is_refused_when_the_sampler_is_made(
        name: str, params: dict[str, Any], message: str) -> None:
    if name == "cmaes":
        pytest.importorskip("cmaes")
    with pytest.raises(IpuTuneError) as err:
        make_sampler(SamplerConfig(name=name, params=params))
    assert str(err.value).startswith(message), str(err.value)
