"""Between Optuna parameters and configs: which knobs a problem searches, how they are drawn.

Parameters are named by their dotted config key (``plan.precision``), except the pipeline
cuts (``plan.pipeline.cut<i>of<S>``, see `ipu_tune.search._splits`). The structure is valid
by construction: replication factors are the powers of two whose stage count
S = num_ipus / replicas the model has blocks for (so stages x replicas = num_ipus); cuts are
drawn only for the drawn S. A knob is drawn only where the plan runs it (`knobs.moot_keys`):
never when the workload mode, the model's input or the dataset leave it moot; the schedule
only for S > 1, replicated tensor sharding only with replicas >= 2, the partials type only
with an fp16 model (drawn after the precision); held at the user's value otherwise. The
micro-batch, when searched, stays at or below the user's; an integer
range (gradient accumulation, device iterations) widens to hold the user's value. With a fixed
global batch, gradient accumulation is derived (global / (micro-batch x replicas)), the
micro-batch is drawn among its divisors and replication factors no micro-batch reaches it
with are left out.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from ipu_tune.case import head_stages
from ipu_tune.config import EvalConfig, TuneConfig, at_one_proportion_if_moved, at_pipeline_minimum
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS, NEEDS, get_key, knob, moot_keys, set_key
from ipu_tune.models import ModelProfile
from ipu_tune.search._grid import grid, grid_size, spec_values
from ipu_tune.search._sections import copied, setters
from ipu_tune.search._space import (
    KnobSpec,
    SearchSpace,
    fit_instances,
    fitted_to_user,
    power_of_two_divisors,  # fmt: skip
)
from ipu_tune.search._splits import cut_param, cuts_to_starts, even_split

__all__ = ["R_PARAM", "Codec", "is_pinned", "set_key"]


def _only(**attrs: str) -> str:
    """The key of the one knob of `ipu_tune.knobs` with these attributes."""
    (key,) = [k.key for k in KNOBS if all(getattr(k, a) == v for a, v in attrs.items())]
    return key


def _needing(need: str) -> str:
    """The key of the one knob of `ipu_tune.knobs` that needs `need` (`knobs.NEEDS`)."""
    (key,) = [k.key for k in KNOBS if need in k.needs]
    return key


_DRAWABLE = {k.key: k.draw for k in KNOBS if k.draw}  # knob key -> how the search draws it
R_PARAM = _only(draw="replicas")
_INSTANCES = _only(draw="instances")
_SPLITS = _only(draw="splits")
_SCHEDULE = _needing("pipelined")  # drawn with the stages
_RTS = _needing("replicated")  # drawn with the replicas
# Global-batch arithmetic: global = micro-batch x GA x replicas.
_GA = "plan.gradient_accumulation"
_MB = "workload.micro_batch_size"
# Needs no drawn knob decides (the mode, the model's input, the dataset): a knob lacking one
# is never drawn. Needs the values of plainly drawn knobs decide (an fp16 model: the
# precision): a knob needing one is drawn after them, when the drawn plan runs it. (The stages
# and replicas decide the schedule's and sharding's, drawn with the structure.)
_FIXED_NEEDS = frozenset(n for n, need in NEEDS.items() if not any(
    k in _DRAWABLE for k in need.keys))
_VALUE_NEEDS = {n: need.keys for n, need in NEEDS.items() if need.keys and all(
    _DRAWABLE.get(k) in ("categorical", "int", "float") for k in need.keys)}


def is_pinned(key: str, pinned: frozenset[str]) -> bool:
    """A key is pinned by itself or by a pinned parent node (``plan.pipeline``)."""
    return any(key == p or key.startswith(p + ".") for p in pinned)


def eval_part(cfg: EvalConfig) -> EvalConfig:
    """The EvalConfig sections of a TuneConfig, deep-copied."""
    return EvalConfig(model=copy.deepcopy(cfg.model), workload=copy.deepcopy(cfg.workload),
                      system=copy.deepcopy(cfg.system), plan=copy.deepcopy(cfg.plan))


@dataclass(frozen=True)
class Decoded:
    config: EvalConfig
    note: str = ""  # why the plan is not the one asked for (global batch not divisible)


class Codec:
    """The searched knobs of one problem; draws, decodes and encodes plans."""

    STRUCTURE_KEYS = (R_PARAM, _SCHEDULE, _RTS)  # replicas; drawn with them: schedule, RTS

    def __init__(self, cfg: TuneConfig, space: SearchSpace, profile: ModelProfile,
                 pinned: frozenset[str]) -> None:
        self.user = eval_part(cfg)
        self.profile = profile
        self.blocks = list(profile.blocks)
        self.num_ipus = cfg.system.num_ipus
        base = eval_part(cfg)
        for key, value in space.fixed.items():
            if not is_pinned(key, pinned):
                set_key(base, key, value)
        self.training = base.workload.mode == "train"
        if not self.training:  # a pinned GA other than 1 is refused (SearchProblem)
            base.plan.gradient_accumulation = 1
        mode = base.workload.mode
        self.facts = profile.facts  # what the knobs' needs read of the model
        fixed_moot = moot_keys(base, self.facts, _FIXED_NEEDS)  # moot whatever is drawn
        searched = {k: s for k, s in space.knobs.items()
                    if not is_pinned(k, pinned) and s.searched_in(mode) and k not in fixed_moot}

        self.target_global_batch = cfg.search.global_batch_size
        if self.target_global_batch is None and space.keep_global_batch:
            u = self.user
            self.target_global_batch = (u.workload.micro_batch_size * u.plan.gradient_accumulation
                                        * u.plan.replication_factor)
        if self.target_global_batch is not None:
            if self.target_global_batch < 1:
                raise IpuTuneError(
                    f"search.global_batch_size={self.target_global_batch}: must be >= 1")
            searched.pop(_GA, None)  # derived from the others
        searched = fitted_to_user(searched, self.user, self.target_global_batch, _MB)

        self.conditional = self._conditional(searched, base)  # drawn when the plan runs them
        self.split_search = searched.pop(_SPLITS, None)
        r_spec = searched.pop(R_PARAM, None)
        self.schedule_spec = searched.pop(_SCHEDULE, None)
        self.rts_spec = searched.pop(_RTS, None)
        inst = searched.get(_INSTANCES)
        if inst is not None and not inst.is_range and not inst.choices:
            # null in the space file: every power of two up to the IPUs (fitted at decode).
            searched[_INSTANCES] = dataclasses.replace(
                inst, choices=tuple(power_of_two_divisors(self.num_ipus)))
        self.knobs: dict[str, KnobSpec] = searched  # drawn unconditionally
        self._setters = setters({**searched, **self.conditional})
        self.base = base
        self.r_options = self._replication_options(r_spec, pinned)
        self.cut_step = int(self.split_search.step or 1) if self.split_search else 1

    def _conditional(self, searched: dict[str, KnobSpec],
                     base: EvalConfig) -> dict[str, KnobSpec]:
        """The searched knobs (removed from `searched`) needing what drawn values decide
        (`_VALUE_NEEDS`); one whose deciding knobs are not drawn is left out when the base plan
        does not run it."""
        out: dict[str, KnobSpec] = {}
        base_moot = moot_keys(base, self.facts, _VALUE_NEEDS)
        for key in list(searched):
            deciders = [d for n in knob(key).needs for d in _VALUE_NEEDS.get(n, ())]
            if deciders:
                spec = searched.pop(key)
                if any(d in searched for d in deciders) or key not in base_moot:
                    out[key] = spec
        return out

    def running(self, params: Mapping[str, Any]) -> list[str]:
        """The `conditional` knobs the plan of `params` runs (drawn after the others)."""
        if not self.conditional:
            return []
        moot = moot_keys(self.decode(params).config, self.facts)
        return [key for key in self.conditional if key not in moot]

    # -- structure -------------------------------------------------------------------------
    def _replication_options(self, spec: KnobSpec | None,
                             pinned: frozenset[str]) -> tuple[int, ...]:
        n, ipus, p = len(self.blocks), self.num_ipus, self.base.plan
        if self.split_search is None:
            options = [ipus // (len(p.pipeline.splits) + 1)]
        elif spec is None:
            options = [p.replication_factor]
        else:
            options = [r for r in (spec.choices or power_of_two_divisors(ipus))
                       if ipus % r == 0 and ipus // r <= n]
            if not options:
                raise IpuTuneError(
                    f"{R_PARAM}: none of {list(spec.choices)} divides system.num_ipus={ipus} "
                    f"into at most {n} stages")
        if is_pinned(_INSTANCES, pinned):  # PopRun splits the replicas evenly among them
            options = [r for r in options if r % p.host_instances == 0]
            if not options:
                raise IpuTuneError(f"{_INSTANCES}={p.host_instances}: divides no replication "
                                   f"factor of system.num_ipus={ipus} (at most {n} stages)")
        target = self.target_global_batch
        if target is not None:  # a searched micro-batch is drawn among the target's divisors
            drawn = self.knobs.get(_MB)
            mbs = drawn.choices if drawn is not None else (self.base.workload.micro_batch_size,)
            ga = self.base.plan.gradient_accumulation
            fixed_ga = is_pinned(_GA, pinned) or not self.training
            kept = [r for r in options if any(
                mb * ga * r == target if fixed_ga else target % (mb * r) == 0 for mb in mbs)]
            if not kept:
                raise IpuTuneError(
                    f"search.global_batch_size={target}: no plan reaches it with micro-batch "
                    + "/".join(map(str, mbs))
                    + (f" and gradient accumulation {ga}" if fixed_ga else "")
                    + f" on replication factors {options}")
            options = kept
        return tuple(sorted(options))

    def stages_of(self, replicas: int) -> int:
        return self.num_ipus // replicas

    def cut_high(self) -> int:
        n = len(self.blocks)
        return 1 + self.cut_step * ((n - 2) // self.cut_step)

    @property
    def param_names(self) -> list[str]:
        """Every parameter any trial may draw (for docs and tests)."""
        names = list(self.knobs)
        if len(self.r_options) > 1:
            names.append(R_PARAM)
        for r in self.r_options:
            s = self.stages_of(r)
            if self.split_search is not None:
                names += [cut_param(i, s) for i in range(1, s)]
        if self.schedule_spec is not None:
            names.append(_SCHEDULE)
        if self.rts_spec is not None:
            names.append(_RTS)
        return names + list(self.conditional)

    # -- drawing ---------------------------------------------------------------------------
    @staticmethod
    def _draw(trial: optuna.Trial, key: str, spec: KnobSpec) -> Any:
        if not spec.is_range:
            return trial.suggest_categorical(key, list(spec.choices))
        assert spec.low is not None and spec.high is not None
        if spec.kind == "int":
            return trial.suggest_int(key, int(spec.low), int(spec.high),
                                     step=int(spec.step or 1), log=spec.log)
        return trial.suggest_float(key, spec.low, spec.high, step=spec.step, log=spec.log)

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        params = {key: self._draw(trial, key, spec) for key, spec in self.knobs.items()}
        r = self.r_options[0]
        if len(self.r_options) > 1:
            r = params[R_PARAM] = trial.suggest_categorical(R_PARAM, list(self.r_options))
        stages = self.stages_of(r)
        if self.split_search is not None and stages > 1:
            for i in range(1, stages):
                name = cut_param(i, stages)
                params[name] = trial.suggest_int(name, 1, self.cut_high(), step=self.cut_step)
        if self.schedule_spec is not None and stages > 1:
            params[_SCHEDULE] = self._draw(trial, _SCHEDULE, self.schedule_spec)
        if self.rts_spec is not None and r >= 2:
            params[_RTS] = self._draw(trial, _RTS, self.rts_spec)
        for key in self.running(params):
            params[key] = self._draw(trial, key, self.conditional[key])
        return params

    # -- enumeration -----------------------------------------------------------------------
    _values = staticmethod(spec_values)

    def grid(self, distinct_splits: bool = True) -> Iterator[dict[str, Any]]:
        """Every parameter dict of the space (brute force). With `distinct_splits`, cut
        permutations (which decode to the same split) are drawn once, in sorted order."""
        return grid(self, distinct_splits)

    def grid_size(self, distinct_splits: bool = True) -> int:
        return grid_size(self, distinct_splits)

    # -- params -> config ------------------------------------------------------------------
    def _fresh(self) -> EvalConfig:
        """A copy of the base the decoder may change: the searched sections (workload, plan)
        are copied; model and system, never searched, are shared (decoding is the local
        search's inner loop, where a deep copy cost more than the simulation)."""
        b = self.base
        plan = copied(b.plan)
        plan.pipeline = copied(b.plan.pipeline)
        plan.pipeline.splits = list(b.plan.pipeline.splits)
        return EvalConfig(model=b.model, workload=copied(b.workload), system=b.system,
                          plan=plan)

    def decode(self, params: Mapping[str, Any]) -> Decoded:
        cfg = self._fresh()
        for key, is_float, section, leaf in self._setters:
            if key in params:
                value = params[key]
                # Optuna's stepped floats carry binary noise (0.7000000000000001).
                value = round(float(value), 10) if is_float else value
                setattr(section(cfg), leaf, list(value) if isinstance(value, tuple) else value)
        r = int(params.get(R_PARAM, self.r_options[0]))
        stages = self.stages_of(r)
        cfg.plan.replication_factor = r
        if self.split_search is not None:
            n = len(self.blocks)
            if stages == 1:
                cfg.plan.pipeline.splits = []
            else:
                even = even_split(n, stages)
                cuts = [int(params.get(cut_param(i, stages), even[i])) for i in range(1, stages)]
                cfg.plan.pipeline.splits = [self.blocks[b] for b in cuts_to_starts(cuts, n)[1:]]
        if stages > 1 and self.schedule_spec is not None and _SCHEDULE in params:
            cfg.plan.pipeline.schedule = params[_SCHEDULE]
        if _INSTANCES in self.knobs and _INSTANCES in params:
            cfg.plan.host_instances = fit_instances(int(params[_INSTANCES]), r,
                                                    cfg.system.servers)
        if r < 2:
            cfg.plan.replicated_tensor_sharding = False
        elif self.rts_spec is not None and _RTS in params:
            cfg.plan.replicated_tensor_sharding = bool(params[_RTS])
        note = ""
        target = self.target_global_batch
        if target is not None and self.training:
            denom = cfg.workload.micro_batch_size * r
            ga = target // denom
            if target % denom or ga < 1:
                ga = max(1, round(target / denom))
                note = (f"global batch {target} is not a multiple of micro-batch "
                        f"{cfg.workload.micro_batch_size} x {r} replicas; nearest plan has "
                        f"gradient accumulation {ga}")
            cfg.plan.gradient_accumulation = ga
        cfg = at_one_proportion_if_moved(cfg, params)
        cfg = at_pipeline_minimum(cfg, head_stages(self.profile, cfg))
        if self.conditional:  # one the plan does not run keeps the user's value
            moot = moot_keys(cfg, self.facts)
            for key in self.conditional.keys() & moot:
                set_key(cfg, key, get_key(self.base, key))
        return Decoded(cfg, note)

    # -- config -> params ------------------------------------------------------------------
    @staticmethod
    def _fit(spec: KnobSpec, value: Any, exact: bool) -> tuple[bool, Any]:
        """(ok, param value) of `value` in `spec`; snapped to the nearest allowed unless exact."""
        if not spec.is_range:
            for c in spec.choices:
                if c == value and isinstance(c, bool) == isinstance(value, bool):
                    return True, c
            numeric = [c for c in spec.choices if isinstance(c, int | float)
                       and not isinstance(c, bool)]
            if exact or not numeric or isinstance(value, bool | str):
                return False, None
            return True, min(numeric, key=lambda c: (abs(c - value), c))
        assert spec.low is not None and spec.high is not None
        v = min(max(float(value), spec.low), spec.high)
        if spec.step:
            v = spec.low + round((v - spec.low) / spec.step) * spec.step
            v = min(v, spec.high)
        if spec.kind == "int":
            v = round(v)
        if exact:
            # The user's own value, when on the grid (Optuna checks it against the same grid).
            return math.isclose(v, float(value), rel_tol=0, abs_tol=1e-9), value
        return True, (int(v) if spec.kind == "int" else round(float(v), 12))

    def encode(self, cfg: EvalConfig, exact: bool = True) -> dict[str, Any] | None:
        """Params that decode to `cfg` (None when the space cannot express it exactly)."""
        params: dict[str, Any] = {}
        for key, spec in self.knobs.items():
            ok, value = self._fit(spec, get_key(cfg, key), exact)
            if not ok:
                return None
            params[key] = value
        r = cfg.plan.replication_factor
        if r not in self.r_options:
            return None
        if len(self.r_options) > 1:
            params[R_PARAM] = r
        stages = self.stages_of(r)
        splits = list(cfg.plan.pipeline.splits)
        if len(splits) + 1 != stages or any(s not in self.blocks for s in splits):
            return None
        if self.split_search is not None and stages > 1:
            for i, name in enumerate(splits, start=1):
                b = self.blocks.index(name)
                cut = 1 + self.cut_step * round((b - 1) / self.cut_step)
                cut = min(max(cut, 1), self.cut_high())
                if exact and cut != b:
                    return None
                params[cut_param(i, stages)] = cut
        elif self.split_search is None and splits != list(self.base.plan.pipeline.splits):
            return None
        for key, cond_spec, active in ((_SCHEDULE, self.schedule_spec, stages > 1),
                                       (_RTS, self.rts_spec, r >= 2)):
            if cond_spec is not None and active:
                ok, value = self._fit(cond_spec, get_key(cfg, key), exact)
                if not ok:
                    return None
                params[key] = value
        moot = moot_keys(cfg, self.facts) if self.conditional else frozenset()
        for key, spec in self.conditional.items():
            if key not in moot:
                ok, value = self._fit(spec, get_key(cfg, key), exact)
                if not ok:
                    return None
                params[key] = value
        if exact and self.decode(params).config != cfg:
            return None  # a knob outside the space differs from the base
        return params
