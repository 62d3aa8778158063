"""Which plan each export renders: the study's best, or, when the exporter's framework cannot run
the best plan (its pipeline schedule or another of its rules, `Schedules`), the best stored trial
it can run that fits; without one, the best plan changed into one it runs (`Schedules.switched`),
simulated once for every exporter that needs that plan.

Contexts are built here and only here, one per distinct plan, and shared by the exporters that
render the same plan; the stored trials are read through `ipu_tune.records`, never run again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from ipu_tune.case import build_case, simulate_case
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.errors import IpuTuneError
from ipu_tune.plan import plan_from_config
from ipu_tune.records import TrialRecord
from ipu_tune.simulator import SimResult

from ._context import ExportContext, export_context
from ._schedules import Schedules, StandIn

__all__ = ["PlanChooser", "StoredTrials"]


@dataclass(frozen=True)
class StoredTrials:
    """The study's finished trials an export may fall back on, the study's objective directions
    (`maximize`/`minimize`: trials are ranked by the objectives in order, so with one objective
    as the study ranks them), and how the study simulates a plan (None: the case path with the
    default constants, as `python -m ipu_tune evaluate` without `--constants`)."""

    trials: Sequence[FrozenTrial]
    directions: Sequence[str]
    simulate: Callable[[EvalConfig], SimResult] | None = None


def _ranked(stored: StoredTrials) -> list[FrozenTrial]:
    """Feasible complete trials, best first (then the earliest): the fitting candidates."""
    signs = [1.0 if d == "maximize" else -1.0 for d in stored.directions]

    def usable(t: FrozenTrial) -> bool:
        v = t.values
        return (t.state == TrialState.COMPLETE and v is not None and len(v) == len(signs)
                and all(math.isfinite(x) for x in v) and TrialRecord.of(t).feasible)

    def key(t: FrozenTrial) -> tuple[float, ...]:
        assert t.values is not None
        return (*(-s * x for s, x in zip(signs, t.values, strict=True)), float(t.number))

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
        return self._stored(schedules) or self._switched(schedules)

    def _trial(self, trial: FrozenTrial) -> tuple[EvalConfig, SimResult] | None:
        """A stored trial's config and result, read once (None: not stored, or does not fit)."""
        if trial.number not in self._read:
            record = TrialRecord.of(trial)
            result = record.sim_result()
            found = None
            if result is not None and result.fits and record.config:
                try:
                    found = (load_config(dict(record.config)), result)
                except IpuTuneError:  # a config this version no longer reads: not a candidate
                    found = None
            self._read[trial.number] = found
        return self._read[trial.number]

    def _stored(self, schedules: Schedules) -> ExportContext | None:
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
            return self._contexts[trial.number]
        return None

    def _switched(self, schedules: Schedules) -> ExportContext:
        """The best plan changed into one the framework runs, simulated once."""
        best = self.best
        cfg = schedules.switched(best.config, best.plan)
        key = ("switched", plan_from_config(cfg))
        if key not in self._contexts:
            result = self._simulate(cfg)
            self._contexts[key] = export_context(
                cfg, result, best.profile, stand_in=self._stand_in(None, result))
        return self._contexts[key]

    def _simulate(self, cfg: EvalConfig) -> SimResult:
        simulate = self.stored.simulate if self.stored is not None else None
        try:
            if simulate is not None:
                return simulate(cfg)
            return simulate_case(build_case(cfg, self.best.profile))
        except IpuTuneError as exc:  # the switched plan is invalid: it runs nowhere
            return SimResult(fits=False, throughput=0.0, step_time_s=math.inf, phases={},
                             bottleneck="invalid plan", memory=(), stages=(), reason=str(exc))

    def _stand_in(self, trial: int | None, result: SimResult) -> StandIn:
        best = self.best
        assert best.result is not None  # `context_for` renders the best as it is without one
        return StandIn(
            best_trial=best.provenance.trial if best.provenance is not None else None,
            best_throughput=best.result.throughput, best=best.plan, trial=trial,
            throughput=result.throughput, fits=result.fits,
            reason=result.reason or "does not fit in memory")
