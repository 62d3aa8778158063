"""Optuna's heartbeat for ask-and-tell workers on a database server.

`Study.optimize` beats for its trial; ipu-tune's workers ask and tell themselves, so a thread
does it: it records a heartbeat for every RUNNING trial this worker claimed, and fails the
stale trials of dead workers on any host and enqueues them again (`fail_stale`), so live
workers pick them up without waiting for the next run.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import TrialState

from ipu_tune.records import TrialRecord, retry_dead_trial
from ipu_tune.storage import stale_trials

__all__ = ["beating", "fail_stale"]

# Optuna warns on every `ask` of a heartbeat storage outside `Study.optimize`; this module is
# the heartbeat of ask-and-tell, so the warning is moot (and would break one-line output).
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used",
                        category=UserWarning)


def _enabled(storage: BaseStorage) -> bool:
    return isinstance(storage, RDBStorage) and storage.get_heartbeat_interval() is not None


def fail_stale(study: optuna.Study, storage: BaseStorage) -> None:
    """Fail (and enqueue again) RUNNING trials whose worker stopped beating, as a dead
    worker's trial found by its PID is (`retry_dead_trial`: the same `fail_reason`, the same
    retry)."""
    for t in stale_trials(storage, study.study_name):
        retry_dead_trial(storage, study, t, TrialRecord.of(t).worker or "unrecorded")


def _beat(study: optuna.Study, storage: RDBStorage, worker: str, study_id: int) -> None:
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if TrialRecord.of(t).worker == worker:
            storage.record_heartbeat(
                storage.get_trial_id_from_study_id_trial_number(study_id, t.number))


def _no_beat(number: int) -> None:
    """Without heartbeats a claim records none."""


@contextmanager
def beating(study: optuna.Study, storage: BaseStorage,
            worker: str) -> Iterator[Callable[[int], None]]:
    """Heartbeats for this worker's trials while the block runs (no-op without heartbeats).

    Yields `claimed(number)`: the first heartbeat of a trial this worker has just asked for,
    recorded at once, before its worker tag. Optuna fails only trials that have a heartbeat
    (`fail_stale_trials`), and the loop below beats every quarter interval: a worker killed
    within a trial's first milliseconds would otherwise leave it RUNNING, tagged with a host
    whose processes this machine cannot see, for good. Killed before this beat, the trial is
    untagged and failed by its age (`recover_stale_trials`)."""
    if not _enabled(storage):
        yield _no_beat
        return
    assert isinstance(storage, RDBStorage)
    interval_s = float(storage.get_heartbeat_interval() or 1)
    study_id = storage.get_study_id_from_name(study.study_name)
    stop = threading.Event()

    def claimed(number: int) -> None:
        storage.record_heartbeat(storage.get_trial_id_from_study_id_trial_number(study_id, number))

    def loop() -> None:
        ticks = 0
        while not stop.wait(interval_s / 4):  # a claimed trial gets its first beat quickly
            try:
                _beat(study, storage, worker, study_id)
                ticks += 1
                if ticks % 8 == 0:
                    fail_stale(study, storage)
            except Exception:
                continue

    thread = threading.Thread(target=loop, name="ipu-tune-heartbeat", daemon=True)
    thread.start()
    try:
        yield claimed
    finally:
        stop.set()
        thread.join(timeout=interval_s)
