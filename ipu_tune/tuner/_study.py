"""Create or resume a study: names, compatibility, stale trials of killed workers, warm start."""

from __future__ import annotations

import warnings
from datetime import datetime

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.config import TuneConfig, to_plain_dict
from ipu_tune.errors import IpuTuneError
from ipu_tune.records import StudyMeta, TrialRecord, fail_trial
from ipu_tune.search import SearchProblem
from ipu_tune.storage import ClaimLock
from ipu_tune.tuner._worker_id import is_alive_here

__all__ = [
    "default_study_name",
    "enqueue_warm_start",
    "open_study",
    "recover_stale_trials",
]

# A claim (`ask` + tag) takes milliseconds; an untagged RUNNING trial older than this on a
# shared database server belongs to a dead worker.
_CLAIM_AGE_S = 60.0


def default_study_name(cfg: TuneConfig) -> str:
    model = cfg.model.name or (cfg.model._target_ or "model").rsplit(".", 1)[-1]
    return f"{model}-{cfg.system.ipu}x{cfg.system.num_ipus}-{cfg.search.name}"


def _metadata(cfg: TuneConfig, problem: SearchProblem, pinned: frozenset[str]) -> StudyMeta:
    # The whole config rides along so that reports and exports can be rebuilt later.
    plain = to_plain_dict(cfg)
    plain["study"]["storage"] = None  # never keep credentials in the study
    return StudyMeta(
        model=cfg.model.name or cfg.model._target_,
        ipu=cfg.system.ipu,
        num_ipus=cfg.system.num_ipus,
        search=cfg.search.name,
        objectives=list(problem.objective_names),
        pinned=sorted(pinned),
        config=plain,
    )


def open_study(
    name: str,
    storage: BaseStorage,
    cfg: TuneConfig,
    problem: SearchProblem,
    pinned: frozenset[str] = frozenset(),
) -> tuple[optuna.Study, bool]:
    """Load `name` or create it; returns (study, created). Refuses a study of another shape."""
    wanted = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
              for d in problem.directions]
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=problem.sampler(),
        directions=wanted,
        load_if_exists=True,
    )
    if list(study.directions) != wanted:
        have = [d.name.lower() for d in study.directions]
        raise IpuTuneError(
            f"study.name={name!r}: the stored study optimises {have}, this search wants "
            f"{list(problem.directions)}; choose another study.name"
        )
    meta = StudyMeta.of(study)
    mine = _metadata(cfg, problem, pinned)
    if meta is None:
        mine.write(study)
        # Names with units for optuna-dashboard, the plots and the report (issue 14).
        with warnings.catch_warnings():  # experimental in Optuna 5; the names are what we want
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(problem.metric_names)
        return study, True
    if meta.model != mine.model:
        raise IpuTuneError(
            f"study.name={name!r}: the stored study tunes model {meta.model!r}, not "
            f"{mine.model!r}; choose another study.name"
        )
    return study, False


def _is_stale(trial: FrozenTrial, claims: ClaimLock) -> bool:
    worker = TrialRecord.of(trial).worker
    if worker is not None:
        return is_alive_here(worker) is False
    # Untagged: its worker died between `ask` and the tag (no live worker is mid-claim while
    # we hold the claim lock), or, on a shared database server, it is older than any claim.
    if claims.local:
        return True
    started = trial.datetime_start
    return started is not None and (datetime.now() - started).total_seconds() > _CLAIM_AGE_S


def recover_stale_trials(study: optuna.Study, storage: BaseStorage,
                         claims: ClaimLock) -> list[int]:
    """Fail RUNNING trials whose worker is dead, and enqueue them again.

    `storage` is the storage `study` was opened with. Only the worker whose FAIL lands first
    enqueues the retry, so concurrent resumes do not duplicate it.
    """
    with claims.recovering():
        return _recover(study, storage, claims)


def _recover(study: optuna.Study, storage: BaseStorage, claims: ClaimLock) -> list[int]:
    retried: list[int] = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not _is_stale(t, claims):
            continue
        worker = TrialRecord.of(t).worker or "untagged"
        if not fail_trial(storage, study, t, f"worker died: {worker}"):
            continue  # another worker failed it first
        if t.params:
            study.enqueue_trial(t.params, user_attrs=TrialRecord.retry_attrs(t.number))
        retried.append(t.number)
    return retried


def enqueue_warm_start(study: optuna.Study, problem: SearchProblem, n_trials: int) -> int:
    plans = problem.warm_start()[: max(0, n_trials)]
    for params in plans:
        study.enqueue_trial(params, skip_if_exists=True)
    return len(plans)
