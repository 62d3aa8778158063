"""`SearchProblem`: what the study runner asks of the search for every trial.

The runner owns storage, resume, results and export; this class owns the search space,
the objectives and constraints, the sampler and the warm start. Every trial draws the
searched knobs, decodes them into a full config (the user's fixed settings + the draw),
simulates it, and returns the objective values with the constraints (<= 0 feasible).
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune import simulator
from ipu_tune.case import build_case, constants_of, read_constants, validate_whole
from ipu_tune.config import EvalConfig, TuneConfig
from ipu_tune.errors import IpuTuneError, bad_value
from ipu_tune.hardware import System
from ipu_tune.knobs import rate_text
from ipu_tune.models import ModelProfile, config_json_values
from ipu_tune.plan import ExecutionPlan
from ipu_tune.records import TrialRecord
from ipu_tune.search._codec import R_PARAM, Codec
from ipu_tune.search._local import LocalSearch
from ipu_tune.search._objectives import (
    DIRECTIONS,
    count_changes,
    memory_constraint,
    metric_names,
    objective_value,
    show_value,
)
from ipu_tune.search._refine import Refiner
from ipu_tune.search._samplers import make_sampler
from ipu_tune.search._select import best_trial
from ipu_tune.search._space import SearchSpace, is_space_file, load_space, parse_space
from ipu_tune.search._warm import WarmPlan, warm_start_plans
from ipu_tune.simulator import SimResult

__all__ = ["HF_CONFIG_FILE", "SearchProblem", "TrialOutcome", "files_named", "tell_outcome"]

# The config keys that name a file a problem reads (`SearchProblem.files_read`).
CONSTANTS_FILE = "simulator.constants"
SPACE_FILE = "search.space"
HF_CONFIG_FILE = "model.hf.config_file"


def files_named(cfg: TuneConfig) -> list[str]:
    """The keys of `cfg` that name a file the problem reads: a constants file, a space file,
    a Transformers config.json."""
    return [key for key, named in ((CONSTANTS_FILE, bool(cfg.simulator.constants)),
                                   (SPACE_FILE, is_space_file(cfg.search.space)),
                                   (HF_CONFIG_FILE, bool(cfg.model.hf.config_file))) if named]

_AMP = "plan.available_memory_proportion"
_AMP_PER_IPU = "plan.available_memory_proportion_per_ipu"
_CACHE_SIZE = 4096  # simulated plans kept per problem (many draws decode to the same plan)
# Samplers that read COMPLETE trials only: GPSampler fits its objective and constraint models
# on them (optuna/samplers/_gp/sampler.py, `sample_relative`). Told PRUNED, its infeasible
# trials taught it nothing and it drew infeasible and repeated plans (resnet101 throughput,
# 70 trials: 13 feasible, 14 repeats, best 12,692 samples/s; told COMPLETE, 40 trials: 20
# feasible, best 16,161 samples/s).
_COMPLETE_ONLY: tuple[type[optuna.samplers.BaseSampler], ...] = (optuna.samplers.GPSampler,)


@dataclass(frozen=True)
class TrialOutcome:
    config: EvalConfig  # the full plan the trial stands for
    result: SimResult
    values: list[float]  # one per objective; NaN only when the plan could not be simulated
    constraints: list[float]  # one per `SearchProblem.constraint_names`; <= 0 feasible
    reason: str = ""  # why the trial is infeasible ("" when feasible)

    @property
    def feasible(self) -> bool:
        return all(c <= 0 for c in self.constraints)


def tell_outcome(study: optuna.Study, trial: optuna.Trial, outcome: TrialOutcome) -> FrozenTrial:
    """Tell Optuna how a trial ended: the one rule every trial loop uses.

    A feasible plan is COMPLETE with its objective values. A plan that is not (a constraint
    > 0, or a plan the simulator refused) is PRUNED without a value: it has no throughput,
    latency or memory figure worth plotting, and a COMPLETE 0.0 would be drawn as one by
    Optuna's plots and optuna-dashboard. Its constraints, reason and plan attributes are
    written before this call (`SearchProblem.run_trial`, the tuner's `write_plan`), so it
    keeps why and by how much it failed. The samplers still learn from it: Optuna runs
    constraints for COMPLETE and PRUNED trials alike (`samplers/_base.py`,
    `_process_constraints_after_trial`) and TPE ranks trials by their constraint violation
    before their state (`_tpe/sampler.py`, `_split_trials`): TPE draws the same plans either
    way (tests/search/test_infeasible.py).

    The exception: a sampler that learns only from COMPLETE trials (`_COMPLETE_ONLY`) is told
    an infeasible plan that could be simulated as COMPLETE with its values, as before; every
    reader of ipu-tune (results rows, best trial, report) goes by the constraints, not the
    state, so those trials are still shown as infeasible there.
    """
    finite = all(math.isfinite(v) for v in outcome.values)
    if finite and (outcome.feasible or isinstance(study.sampler, _COMPLETE_ONLY)):
        return study.tell(trial, [float(v) for v in outcome.values])
    return study.tell(trial, state=TrialState.PRUNED)


def _invalid_result(message: str) -> SimResult:
    """A plan the simulator refused: it does not run, so it fits nothing and moves nothing."""
    return SimResult(fits=False, throughput=0.0, step_time_s=math.inf, phases={},
                     bottleneck="invalid plan", memory=(), stages=(), reason=message)


class SearchProblem:
    """One search: the user's config and pins, a space preset, objectives and constraints."""

    def __init__(self, cfg: TuneConfig, profile: ModelProfile, system: System,
                 pinned: frozenset[str] = frozenset(), space: SearchSpace | None = None,
                 stored: Mapping[str, Any] | None = None) -> None:
        """`space`, the one `cfg.search.space` names as its caller read it (or a test's);
        `stored`, what a stored study read from the files its config names (`files_read`),
        replaces opening them."""
        self.cfg = cfg
        self.profile = profile
        self.system = system
        self.pinned = frozenset(pinned)
        if _AMP_PER_IPU in pinned and cfg.plan.available_memory_proportion_per_ipu:
            # The pinned per-IPU proportions set every IPU's: a drawn one proportion would
            # replace them (`at_one_proportion_if_moved`), the pin silently undone.
            self.pinned |= {_AMP}
        stored = stored or {}
        if space is None and SPACE_FILE in stored:
            path = Path(cfg.search.space)
            space = parse_space(stored[SPACE_FILE], f"{path} (as the study read it)", path.stem)
        self.space: SearchSpace = space if space is not None else load_space(cfg.search.space)
        # calibrate's output, if any; a stored study's kept values are checked as the file's
        # were (anyone may edit a study).
        self.constants = (constants_of(stored[CONSTANTS_FILE], f"{CONSTANTS_FILE}="
                                       f"{cfg.simulator.constants!r} (as the study read it)")
                          if CONSTANTS_FILE in stored else read_constants(cfg.simulator.constants))
        names = list(cfg.search.objectives)
        for name in names:
            if name not in DIRECTIONS:
                raise bad_value("search.objectives", name, "allowed: " + ", ".join(DIRECTIONS),
                                DIRECTIONS)
        if not names or len(set(names)) != len(names):
            raise bad_value("search.objectives", names, "a non-empty list without repeats")
        self.objective_names: list[str] = names
        self.directions: list[str] = [DIRECTIONS[n] for n in names]
        self.codec = Codec(cfg, self.space, profile, self.pinned)
        ga = cfg.plan.gradient_accumulation
        if not self.codec.training and ga != 1 and "plan.gradient_accumulation" in self.pinned:
            raise bad_value("plan.gradient_accumulation", ga,  # as `validate` refuses it
                            f"must be 1 for infer (search space {self.space.name} runs it)")
        if "latency" in names and self.codec.training:
            raise bad_value("workload.mode", "train",
                            "the latency objective times inference; use workload.mode=infer "
                            "(the latency space sets it unless pinned)")
        self._cache: OrderedDict[ExecutionPlan, SimResult] = OrderedDict()
        self._warm: list[WarmPlan] | None = None
        self._refiner: Refiner | None = None
        try:  # the user's settings with the preset's fixed values must make a valid plan
            self._check(self.codec.decode({}).config)
        except IpuTuneError as exc:
            raise IpuTuneError(f"search.space={cfg.search.space}: {exc}") from None
        self.constraint_names: list[str] = ["memory"]
        if self.codec.target_global_batch is not None:
            self.constraint_names.append("global_batch")
        self.throughput_floor = self._resolve_floor()
        if self.throughput_floor is not None:
            self.constraint_names.append("throughput_floor")

    @property
    def files_read(self) -> dict[str, Any]:
        """What the files the config names held, by the key naming each: the constants read,
        the space file's mapping, the config.json's contents (read again: a small file). A
        study keeps it (`StudyMeta.files`), so the commands on a stored study read these
        instead of opening a file its config names."""
        values = {CONSTANTS_FILE: lambda: asdict(self.constants),
                  SPACE_FILE: lambda: dict(self.space.document),
                  HF_CONFIG_FILE: lambda: config_json_values(str(self.cfg.model.hf.config_file))}
        return {key: values[key]() for key in files_named(self.cfg)}

    # -- simulation --------------------------------------------------------------------------

    def _check(self, cfg: EvalConfig) -> ExecutionPlan:
        validate_whole(cfg, self.profile)
        return build_case(cfg, self.profile, self.system).plan

    def simulate(self, cfg: EvalConfig) -> SimResult:
        """Simulate a full config of this problem (cached; raises IpuTuneError if invalid)."""
        plan = self._check(cfg)
        hit = self._cache.get(plan)
        if hit is not None:
            self._cache.move_to_end(plan)
            return hit
        result = simulator.simulate(self.profile, self.system, plan, self.constants)
        self._cache[plan] = result
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    def evaluate(self, cfg: EvalConfig, note: str = "") -> TrialOutcome:
        """Objectives and constraints of one config; invalid plans are infeasible, not errors."""
        try:
            result = self.simulate(cfg)
        except IpuTuneError as exc:
            return TrialOutcome(cfg, _invalid_result(str(exc)), [math.nan] * len(self.directions),
                                [1.0] * len(self.constraint_names), reason=str(exc))
        changes = (count_changes(cfg, self.codec.user, self.codec.facts)
                   if "changes" in self.objective_names else 0)
        values = [objective_value(n, result, changes) for n in self.objective_names]
        constraints = [memory_constraint(result)]
        reasons = [] if result.fits else [result.reason or "does not fit in memory"]
        target = self.codec.target_global_batch
        if target is not None:
            p = cfg.plan
            batch = cfg.workload.micro_batch_size * p.gradient_accumulation * p.replication_factor
            constraints.append(abs(batch - target) / target)
            if batch != target:
                reasons.append(note or f"global batch {batch} instead of {target}")
        if self.throughput_floor is not None:
            floor = self.throughput_floor
            constraints.append((floor - result.throughput) / floor)
            if result.throughput < floor:
                reasons.append(f"throughput {rate_text(result.throughput)} below the floor "
                               f"{rate_text(floor)}")
        return TrialOutcome(cfg, result, values, constraints, reason="; ".join(reasons))

    # -- the runner's interface ----------------------------------------------------------------
    def run_trial(self, trial: optuna.Trial) -> TrialOutcome:
        params = self.codec.suggest(trial)
        decoded = self.codec.decode(params)
        outcome = self.evaluate(decoded.config, decoded.note)
        TrialRecord.write_constraints(trial, self.constraint_names, outcome.constraints)
        changes = (count_changes(decoded.config, self.codec.user, self.codec.facts)
                   if "changes" in self.objective_names else None)
        TrialRecord.write_outcome(trial, outcome.reason, changes)
        return outcome

    @property
    def metric_names(self) -> list[str]:
        """Optuna metric names (quantity [unit]) of the objectives."""
        return metric_names(self.objective_names)

    @staticmethod
    def show_value(name: str, value: float) -> str:
        """A stored objective value with its unit (``1.536 ms``)."""
        return show_value(name, value)

    def searches(self, key: str, value: Any) -> bool:
        """Whether a draw of this search can set knob `key` to `value`: the specs the codec
        fitted to the user's plan and mode (micro-batch at or below the user's, knobs moot in
        this mode or input left out, GA derived from a fixed global batch, pins), not the
        space file's."""
        c = self.codec
        if key == R_PARAM:
            return value in c.r_options
        drawn = {s.key: s for s in (c.split_search, c.schedule_spec, c.rts_spec) if s is not None}
        spec = drawn.get(key, c.knobs.get(key, c.conditional.get(key)))
        return spec is not None and spec.allows(value)

    def sampler(self) -> optuna.samplers.BaseSampler:
        return make_sampler(self.cfg.sampler, len(self.directions))

    def refiner(self) -> Refiner | None:
        """The local refinement of this problem (`ipu_tune.search.refine_study`); None when
        `sampler.local_search` is off (the baseline presets: random, brute force)."""
        if not self.cfg.sampler.local_search:
            return None
        if self._refiner is None:
            self._refiner = Refiner(LocalSearch(self, random.Random(self.cfg.sampler.seed)))
        return self._refiner

    def warm_plans(self) -> list[WarmPlan]:
        """The warm-start plans with their labels (user plan, balanced split, rules of thumb)."""
        if self._warm is None:
            self._warm = warm_start_plans(self)
        return self._warm

    def warm_start(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        seen: set[tuple[tuple[str, str], ...]] = set()
        for wp in self.warm_plans():
            key = tuple(sorted((k, repr(v)) for k, v in wp.params.items()))
            if key not in seen:
                seen.add(key)
                out.append(dict(wp.params))
        return out

    def config_from_params(self, params: dict[str, Any]) -> EvalConfig:
        return self.codec.decode(params).config

    def best_trial(self, study: optuna.Study) -> optuna.trial.FrozenTrial | None:
        return best_trial(study, self.directions)

    # -- throughput floor ----------------------------------------------------------------------
    def _resolve_floor(self) -> float | None:
        floor = self.cfg.search.throughput_floor
        if floor is not None:
            if floor <= 0:
                raise bad_value("search.throughput_floor", floor, "must be > 0 samples/s")
            return float(floor)
        ratio = self.space.throughput_floor_ratio
        if ratio is None:
            return None
        reference = self.reference_throughput()
        return ratio * reference if reference > 0 else None

    def reference_throughput(self) -> float:
        """Samples/s of the user's plan if it fits, else of the fastest fitting warm-start plan."""
        rates = [(wp.label, self.simulate(wp.config)) for wp in self.warm_plans()]
        user = [r.throughput for label, r in rates if label == "user" and r.fits]
        if user:
            return user[0]
        return max((r.throughput for _, r in rates if r.fits), default=0.0)
