"""Optuna's heartbeat on a database server, for workers on any host: a worker that dies stops
beating, and after the grace period the next worker fails its trial and retries it."""

from __future__ import annotations

from collections.abc import Sequence

from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.storage._rdb_read import CheckedRDBStorage

__all__ = ["HEARTBEAT_GRACE_S", "HEARTBEAT_INTERVAL_S", "BeatingRDBStorage", "stale_trials"]

# A worker on a database server records a heartbeat this often; a RUNNING trial without one for
# the grace period belongs to a dead worker (any host). Optuna's own mechanism.
HEARTBEAT_INTERVAL_S = 2
HEARTBEAT_GRACE_S = 10


def stale_trials(storage: BaseStorage, study_name: str) -> list[FrozenTrial]:
    """The RUNNING trials of `study_name` whose worker stopped beating for longer than the
    grace period (none on a storage without heartbeats: a journal, SQLite)."""
    if not isinstance(storage, BeatingRDBStorage):
        return []
    study_id = storage.get_study_id_from_name(study_name)
    # Optuna's own query of stale trials (what `fail_stale_trials` fails), kept to this module.
    return [storage.get_trial(i) for i in storage._get_stale_trial_ids(study_id)]


class BeatingRDBStorage(CheckedRDBStorage):
    """An RDB storage whose trials beat from the moment they run.

    Optuna ignores a RUNNING trial that never beat; a worker killed before its heartbeat
    thread's first beat would leave it RUNNING forever. So the claim itself (a new trial, or
    an enqueued one taken) records the first heartbeat.
    """

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        trial_id = super().create_new_trial(study_id, template_trial)
        if template_trial is None or template_trial.state == TrialState.RUNNING:
            self.record_heartbeat(trial_id)
        return trial_id

    def set_trial_state_values(self, trial_id: int, state: TrialState,
                               values: Sequence[float] | None = None) -> bool:
        taken = super().set_trial_state_values(trial_id, state, values)
        if taken and state == TrialState.RUNNING:
            self.record_heartbeat(trial_id)
        return taken
