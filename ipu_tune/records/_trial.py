"""A trial's attributes: what ipu-tune keeps on an Optuna trial (`ipu_tune.records`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.simulator import SIMULATOR_VERSION, IpuMemory, SimResult, StageTime

__all__ = [
    "MAX_RETRIES",
    "TrialRecord",
    "fail_trial",
    "native_constraints",
    "result_payload",
    "retry_dead_trial",
    "user_attr_constraints",
]

_WORKER = "worker"
_PLAN = "plan"  # JSON text of {"config": ..., "result": ...}
_CONFIG = "config"
_RESULT = "result"
_CONSTRAINTS = "constraints"
_REASON = "infeasible_reason"
_CHANGES = "changes"
_SURPLUS = "surplus"
_RETRY_OF, _RETRIES, _ORIGIN = "retry_of", "retries", "origin"
_FAIL_REASON = "fail_reason"  # Optuna's own system attribute for failed trials
_DETAIL = "detail"  # inside ``result``: the whole SimResult, for the exports

# The figures of ``result`` the results row and the study listing read.
_ROW_FIGURES = ("fits", "throughput", "memory_per_ipu", "memory_limit_bytes", "bottleneck",
                "reason", "step_time_s", "device_throughput")


def _finite(value: Any) -> Any:
    """JSON-ready: non-finite floats become None (not every storage keeps NaN/inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def result_payload(result: SimResult, whole: bool = True) -> dict[str, Any]:
    """What a trial keeps of its simulated result: the row's figures and the simulator version;
    with `whole`, the whole result (``detail``) the exports read. The tuner keeps it for
    feasible plans only (the only ones exported; 2.3 of the 3.5 KB of a trial's plan)."""
    d = result.to_dict()
    out: dict[str, Any] = {k: d.get(k) for k in _ROW_FIGURES}
    out["simulator_version"] = SIMULATOR_VERSION
    if whole:
        out[_DETAIL] = d
    return out  # non-finite floats (a refused plan's step time) are stored as null


def _sim_result(detail: Mapping[str, Any]) -> SimResult | None:
    """The SimResult of a stored ``detail`` (None: missing or not finite)."""
    try:
        if detail["step_time_s"] is None:
            return None
        return SimResult(
            fits=bool(detail["fits"]),
            throughput=float(detail["throughput"]),
            step_time_s=float(detail["step_time_s"]),
            phases={str(k): float(v) for k, v in detail["phases"].items()},
            bottleneck=str(detail["bottleneck"]),
            memory=tuple(
                IpuMemory(ipu=int(m["ipu"]), stage=int(m["stage"]),
                          categories={str(k): int(v) for k, v in m["categories"].items()},
                          limit_bytes=int(m["limit_bytes"]),
                          max_tile_bytes=int(m["max_tile_bytes"]),
                          tile_limit_bytes=int(m["tile_limit_bytes"]))
                for m in detail["memory"]),
            stages=tuple(
                StageTime(stage=int(t["stage"]), blocks=tuple(t["blocks"]),
                          forward_s=float(t["forward_s"]), backward_s=float(t["backward_s"]),
                          recompute_s=float(t["recompute_s"]), inter_ipu_s=float(t["inter_ipu_s"]),
                          inter_ipu_back_s=(None if t.get("inter_ipu_back_s") is None
                                            else float(t["inter_ipu_back_s"])),
                          also=tuple(t.get("also") or ()))
                for t in detail["stages"]),
            reason=str(detail.get("reason") or ""),
            samples_per_step=float(detail.get("samples_per_step") or 0.0),
            device_throughput=float(detail.get("device_throughput") or 0.0),
            extras=dict(detail.get("extras") or {}),
            latency_s=float(detail.get("latency_s") or 0.0),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def native_constraints() -> bool:
    """Optuna >= 5 keeps constraints on the trial (`Trial.set_constraint`)."""
    return hasattr(optuna.trial.Trial, "set_constraint")


@dataclass(frozen=True)
class TrialRecord:
    """ipu-tune's view of one trial's attributes (read with `of`, written with the `tag_*`/`write_*`
    functions). `config` and `result` are parsed on first use: most readers (feasibility,
    origin, worker) never need them."""

    worker: str | None
    held: Any  # the ``plan`` attribute as stored (text or dict; None: not stored)
    constraints: list[float] | None  # as ipu-tune stored them (None: not stored)
    feasible: bool = False  # every constraint, from any Optuna version's record, <= 0
    reason: str = ""
    changes: int | None = None
    surplus: bool = False
    retry_of: int | None = None
    retries: int = 0  # times its plan was retried after its worker died (0: a first attempt)
    origin: str = ""
    # The constraints it misses (> 0), by name: `memory` is the first one ipu-tune writes
    # (`SearchProblem.constraint_names`); the others are named only where Optuna keeps names
    # (natively, since Optuna 5), else `other`.
    missed: tuple[str, ...] = ()

    @classmethod
    def of(cls, trial: FrozenTrial, plan: Mapping[str, Any] | None = None) -> TrialRecord:
        """`plan`: the trial's plan as `write_plan` returned it (the text parsed, without
        parsing it again); None: read from the trial."""
        a = trial.user_attrs
        worker = a.get(_WORKER)
        changes = a.get(_CHANGES)
        retry, retries = a.get(_RETRY_OF), a.get(_RETRIES)
        every = _constraint_values(trial)
        if plan is None:
            plan = a.get(_PLAN)
        return cls(
            worker=worker if isinstance(worker, str) else None,
            held=plan if isinstance(plan, str | Mapping) else None,
            constraints=_stored_constraints(trial),
            # A trial without any constraint record is not trusted as feasible.
            feasible=every is not None and all(v <= 0 for v in every),
            reason=str(a.get(_REASON) or ""),
            changes=int(changes) if isinstance(changes, int) else None,
            surplus=bool(a.get(_SURPLUS, False)),
            retry_of=int(retry) if isinstance(retry, int) else None,
            # A retry stored before the count existed is its plan's first.
            retries=retries if isinstance(retries, int) else int(isinstance(retry, int)),
            origin=str(a.get(_ORIGIN) or ""),
            missed=_missed(trial),
        )

    @cached_property
    def _plan(self) -> Mapping[str, Any]:
        if isinstance(self.held, str):
            try:
                parsed = json.loads(self.held)
            except ValueError:
                return {}
            return parsed if isinstance(parsed, Mapping) else {}
        return self.held if isinstance(self.held, Mapping) else {}

    @property
    def config(self) -> Mapping[str, Any]:
        """The full config the trial stands for (plain dict of the schema; {}: not stored)."""
        return self._plan.get(_CONFIG) or {}

    @property
    def result(self) -> Mapping[str, Any]:
        """The simulated figures (`result_payload`; {}: not stored)."""
        return self._plan.get(_RESULT) or {}

    def sim_result(self) -> SimResult | None:
        """The trial's SimResult as stored (None: an infeasible plan, which keeps only the
        row's figures, or a plan that could not be simulated)."""
        detail = self.result.get(_DETAIL)
        return _sim_result(detail) if isinstance(detail, Mapping) else None

    # -- writing (on a live trial, before `tell`) ------------------------------------------
    @staticmethod
    def tag_worker(trial: optuna.Trial, worker: str) -> None:
        trial.set_user_attr(_WORKER, worker)

    @staticmethod
    def tag_surplus(trial: optuna.Trial) -> None:
        trial.set_user_attr(_SURPLUS, True)

    @staticmethod
    def write_constraints(trial: optuna.Trial, names: Sequence[str],
                          values: Sequence[float]) -> None:
        # Once: native on Optuna >= 5 (every sampler reads them there), else the user attribute
        # the samplers' `constraints_func` reads (`user_attr_constraints`).
        if native_constraints():
            for name, value in zip(names, values, strict=True):
                trial.set_constraint(name, value)
        else:
            trial.set_user_attr(_CONSTRAINTS, [float(c) for c in values])

    @staticmethod
    def write_outcome(trial: optuna.Trial, reason: str = "", changes: int | None = None) -> None:
        if reason:
            trial.set_user_attr(_REASON, reason)
        if changes is not None:
            trial.set_user_attr(_CHANGES, changes)

    @staticmethod
    def write_plan(trial: optuna.Trial, config: Mapping[str, Any],
                   result: Mapping[str, Any]) -> Mapping[str, Any]:
        """Store the plan; returns it as a reader parses it (`of(trial, plan)` takes it), up to
        tuples for lists."""
        # One write, not two: each user attribute is a storage write (a journal line). Text,
        # not a nested dict: see the module docstring.
        plan: Mapping[str, Any] = {_CONFIG: config, _RESULT: result}
        try:
            text = json.dumps(plan, separators=(",", ":"), allow_nan=False)
        except ValueError:  # NaN/inf is not JSON: null, as every storage and reader takes it
            plan = _finite(plan)
            text = json.dumps(plan, separators=(",", ":"))
        trial.set_user_attr(_PLAN, text)
        return plan

    @staticmethod
    def retry_attrs(number: int, retries: int = 1) -> dict[str, Any]:
        """User attributes of the trial enqueued to repeat trial `number` (`retries`: its
        plan's retries, this one included)."""
        return {_RETRY_OF: number, _RETRIES: retries}

    @staticmethod
    def origin_attrs(label: str) -> dict[str, Any]:
        """User attributes of a trial enqueued by the search (its origin, for the report)."""
        return {_ORIGIN: label}


def user_attr_constraints(trial: FrozenTrial) -> list[float]:
    """The constraints a sampler's `constraints_func` reads on Optuna < 5 (1.0: unknown)."""
    return [float(c) for c in trial.user_attrs.get(_CONSTRAINTS, [1.0])]


def _stored_constraints(trial: FrozenTrial) -> list[float] | None:
    """One value per constraint, in the problem's order, as ipu-tune stored them: native on
    Optuna >= 5 (written in that order), the user attribute before (None: not stored)."""
    stored = trial.user_attrs.get(_CONSTRAINTS)
    native = getattr(trial, "constraints", None)
    if not isinstance(stored, list | tuple):
        stored = list(native.values()) if isinstance(native, dict) and native else None
    return None if stored is None else [float(c) for c in stored]


def _missed(trial: FrozenTrial) -> tuple[str, ...]:
    native = getattr(trial, "constraints", None)
    if isinstance(native, dict) and native:
        return tuple(str(k) for k, v in native.items() if float(v) > 0)
    stored = _stored_constraints(trial)
    return tuple(("memory" if i == 0 else "other") for i, v in enumerate(stored or ()) if v > 0)


def _constraint_values(trial: FrozenTrial) -> list[float] | None:
    # Native (Optuna >= 5), then Optuna < 5 samplers' `constraints_func`, then ours.
    found = [stored for stored in (getattr(trial, "constraints", None),
                                   trial.system_attrs.get(_CONSTRAINTS),
                                   trial.user_attrs.get(_CONSTRAINTS))
             if (isinstance(stored, dict) and stored) or isinstance(stored, list | tuple)]
    if not found:
        return None
    return [float(v) for stored in found
            for v in (stored.values() if isinstance(stored, dict) else stored)]


def fail_trial(storage: optuna.storages.BaseStorage, study: optuna.Study, trial: FrozenTrial,
               reason: str) -> bool:
    """Mark a RUNNING trial of a dead worker FAILED through the public API of `storage` (the
    study's); False when another process finished or failed it first."""
    trial_id = storage.get_trial_id_from_study_id_trial_number(
        storage.get_study_id_from_name(study.study_name), trial.number)
    try:
        storage.set_trial_system_attr(trial_id, _FAIL_REASON, reason)
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
    except (UpdateFinishedTrialError, RuntimeError):
        return False
    return True


# A plan whose worker dies each time it runs (killed for its memory) would be retried for ever;
# after this many retries it is not enqueued again (Optuna's `RetryFailedTrialCallback` cap).
MAX_RETRIES = 2


def retry_dead_trial(storage: optuna.storages.BaseStorage, study: optuna.Study,
                     trial: FrozenTrial, worker: str, cause: str = "") -> bool:
    """Fail the RUNNING trial of dead `worker` and enqueue its plan again, on every storage
    alike, however the death was found (a PID here, a stopped heartbeat on a server).
    `fail_reason`: "worker died: WORKER", or `cause` when the worker said why it stopped (a
    full disk); a plan retried `MAX_RETRIES` times is not enqueued again, and its reason says
    so. The retry carries only its origin and count, not the dead trial's attributes (Optuna
    warns when a constraint is set twice). False when another process failed or finished the
    trial first (it enqueued the retry)."""
    # A trial killed before its journal write has no parameters; an enqueued one its plan.
    params = trial.params or trial.system_attrs.get("fixed_params")
    retries = TrialRecord.of(trial).retries
    reason = cause or f"worker died: {worker}"
    if params and retries >= MAX_RETRIES:
        reason += (f"; not retried: its plan was retried {retries} times already (at most "
                   f"{MAX_RETRIES})")
    if not fail_trial(storage, study, trial, reason):
        return False
    if params and retries < MAX_RETRIES:
        study.enqueue_trial(params, user_attrs=TrialRecord.retry_attrs(trial.number,
                                                                       retries + 1))
    return True


