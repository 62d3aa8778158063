"""Which plan each export renders: the study's best, or, when the exporter's framework cannot run
the best plan (its pipeline schedule or another of its rules, `Schedules`), the better of two
plans it runs, by the study's objectives: the best stored trial that fits and keeps the
study's constraints, and the best plan changed into one it runs (`Schedules.switched`),
simulated once for every exporter that needs that plan. Without a way to score the changed
plan (`StoredTrials.values`), the stored trial comes first.

Contexts are built here and only here, one per distinct plan, and shared by the exporters that
render the same plan; the stored trials are read through `ipu_tune.records`, never run again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from ipu_tune.case import build_case, head_stages, simulate_case
from ipu_tune.config import EvalConfig, forget_old_defaults, load_config
from ipu_tune.errors import IpuTuneError
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.records import TrialRecord
from ipu_tune.simulator import SimResult

from ._context import ExportContext, export_context
from ._schedules import Schedules, StandIn

__all__ = ["PlanChooser", "StoredTrials"]


Key = Callable[[Sequence[float]], tuple[float, ...]]


@dataclass(frozen=True)
class StoredTrials:
    """The study's finished trials an export may fall back on, the study's objective directions
    (`maximize`/`minimize`), and how the study simulates a plan (None: the case path with the
    default constants, as `python -m ipu_tune evaluate` without `--constants`).

    `values`: the study's objective values of a changed plan and its result, and why it breaks
    one of the study's constraints ("" when it keeps them); None: a changed plan cannot be
    ranked, and a stored trial comes first. `rank`: the study's own order of objective values
    (smaller first: `ipu_tune.search.rank_key`, the compromise of a study of several
    objectives); None: the objectives in order."""

    trials: Sequence[FrozenTrial]
    directions: Sequence[str]
    simulate: Callable[[EvalConfig], SimResult] | None = None
    values: Callable[[EvalConfig, SimResult], tuple[Sequence[float], str]] | None = None
    rank: Key | None = None

    def key(self, values: Sequence[float]) -> tuple[float, ...]:
        """Objective values as a key that sorts the best first, as the study ranks them."""
        if self.rank is not None:
            return self.rank(values)
        return tuple(-x if d == "maximize" else x
                     for d, x in zip(self.directions, values, strict=True))

    def usable(self, values: Sequence[float] | None) -> bool:
        return (values is not None and len(values) == len(self.directions)
                and all(math.isfinite(x) for x in values))


def _ranked(stored: StoredTrials) -> list[FrozenTrial]:
    """Feasible complete trials, best first (then the earliest): the fitting candidates."""
    def usable(t: FrozenTrial) -> bool:
        return (t.state == TrialState.COMPLETE and stored.usable(t.values)
                and TrialRecord.of(t).feasible)

    def key(t: FrozenTrial) -> tuple[float, ...]:
        assert t.values is not None
        return (*stored.key(t.values), float(t.number))

    return sorted((t for t in stored.trials if usable(t)), key=key)


class PlanChooser:
    """The context each exporter renders, given the best plan's context (built by the caller)."""

    def __init__(self, best: ExportContext, stored: StoredTrials | None = None) -> None:
        self.best = best
        self.stored = stored
        self._ranked: list[FrozenTrial] | None = None
        self._read: dict[int, tuple[EvalConfig, SimResult] | None] = {}
        self._contexts: dict[object, ExportContext] = {}  # trial number, or ("switched", plan)

    def context_for(self, schedules: Schedules | None) -> ExportContext:
        """The best plan's context if the framework runs it (or no simulated result of it is
        given: nothing to compare a stand-in with), else the plan that stands in."""
        best = self.best
        if schedules is None or best.result is None or schedules.runs(best.plan):
            return best
        stored = self._stored(schedules)
        if stored is None:
            return self._switched(schedules, None)
        trial, context = stored
        if self.stored is None or self.stored.values is None:
            return context  # the changed plan cannot be ranked against it
        switched = self._switched(schedules, trial)
        return switched if switched.stand_in and switched.stand_in.over else context

    def _trial(self, trial: FrozenTrial) -> tuple[EvalConfig, SimResult] | None:
        """A stored trial's config and result, read once (None: not stored, or does not fit)."""
        if trial.number not in self._read:
            record = TrialRecord.of(trial)
            result = record.sim_result()
            found = None
            if result is not None and result.fits and record.config:
                try:
                    found = (load_config(dict(forget_old_defaults(record.config))), result)
                except IpuTuneError:  # a config this version no longer reads: not a candidate
                    found = None
            self._read[trial.number] = found
        return self._read[trial.number]

    def _stored(self, schedules: Schedules) -> tuple[FrozenTrial, ExportContext] | None:
        """The best stored trial the framework runs that fits, and its context."""
        if self.stored is None:
            return None
        if self._ranked is None:
            self._ranked = _ranked(self.stored)
        for trial in self._ranked:
            found = self._trial(trial)
            if found is None or not schedules.runs(plan_from_config(found[0])):
                continue
            if trial.number not in self._contexts:
                cfg, result = found
                self._contexts[trial.number] = export_context(
                    cfg, result, self.best.profile,
                    stand_in=self._stand_in(trial.number, result))
            return trial, self._contexts[trial.number]
        return None

    def _switched(self, schedules: Schedules, rival: FrozenTrial | None) -> ExportContext:
        """The best plan changed into one the framework runs, simulated once; its stand-in
        names `rival` (the best stored trial the framework runs) when it ranks above it, and
        the study's constraints it breaks."""
        best = self.best
        head = head_stages(best.profile, best.config) if best.profile is not None else 0
        cfg = schedules.switched(best.config, best.plan, head)
        key = ("switched", plan_from_config(cfg), rival.number if rival else None)
        if key not in self._contexts:
            result = self._simulate(cfg)
            values, broken = self._score(cfg, result)
            over = self._beaten(values, broken, result, rival)
            self._contexts[key] = export_context(
                cfg, result, best.profile, stand_in=self._stand_in(
                    None, result, over, broken if result.fits else "", plan_from_config(cfg)))
        return self._contexts[key]

    def _score(self, cfg: EvalConfig, result: SimResult) -> tuple[Sequence[float] | None, str]:
        """The study's objective values of a changed plan and the constraints it breaks (None
        and "": the study gives no way to score it)."""
        stored = self.stored
        if stored is None or stored.values is None:
            return None, ""
        values, broken = stored.values(cfg, result)
        return values, broken

    def _beaten(self, mine: Sequence[float] | None, broken: str, result: SimResult,
                rival: FrozenTrial | None) -> tuple[int, float] | None:
        """`rival`'s number and throughput when the changed plan's values `mine` rank above it
        by the study's order (it fits and keeps the constraints), else None."""
        stored = self.stored
        if rival is None or stored is None or broken or not result.fits:
            return None
        theirs = rival.values
        if not stored.usable(mine) or not stored.usable(theirs):
            return None
        assert mine is not None and theirs is not None
        if stored.key(mine) >= stored.key(theirs):
            return None
        found = self._trial(rival)
        return (rival.number, found[1].throughput) if found else None

    def _simulate(self, cfg: EvalConfig) -> SimResult:
        simulate = self.stored.simulate if self.stored is not None else None
        try:
            if simulate is not None:
                return simulate(cfg)
            return simulate_case(build_case(cfg, self.best.profile))
        except IpuTuneError as exc:  # the switched plan is invalid: it runs nowhere
            return SimResult(fits=False, throughput=0.0, step_time_s=math.inf, phases={},
                             bottleneck="invalid plan", memory=(), stages=(), reason=str(exc))

    def _stand_in(self, trial: int | None, result: SimResult,
                  over: tuple[int, float] | None = None, broken: str = "",
                  plan: ExecutionPlan | None = None) -> StandIn:
        best = self.best
        assert best.result is not None  # `context_for` renders the best as it is without one
        return StandIn(
            best_trial=best.provenance.trial if best.provenance is not None else None,
            best_throughput=best.result.throughput, best=best.plan, trial=trial,
            throughput=result.throughput, fits=result.fits,
            reason=result.reason or "does not fit in memory", over=over, broken=broken,
            plan=plan)
