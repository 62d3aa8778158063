"""Optuna's RDB storage, its trial reads of an edited database ending in one line.

Optuna stores a finite objective value in a column it reads back with `assert value is not
None` (`optuna/storages/_rdb/models.py`, `TrialValueModel.stored_repr_to_value`): a database
edited to hold NULL there (SQLite stores a NaN so) fails every read of the trial with a bare
AssertionError. Optuna fails a trial whose objective is NaN, so only an edited storage holds
one: the read says so, as the journal's reader refuses such a value (`check_stored_values`).
"""

from __future__ import annotations

from typing import Any

from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial

from ipu_tune._redact import redact
from ipu_tune.errors import IpuTuneError

__all__ = ["CheckedRDBStorage"]


class CheckedRDBStorage(RDBStorage):
    """An RDB storage whose trial reads refuse a stored value Optuna cannot read."""

    # Optuna's cache in front of an RDB storage (`_CachedStorage`, which `optuna.load_study`
    # puts there) reads trials through `_get_trials`, as `get_all_trials` does.
    def _get_trials(self, *args: Any, **kwargs: Any) -> list[FrozenTrial]:
        try:
            return super()._get_trials(*args, **kwargs)
        except AssertionError:
            raise self._unreadable() from None

    def get_trial(self, trial_id: int) -> FrozenTrial:
        try:
            return super().get_trial(trial_id)
        except AssertionError:
            raise self._unreadable() from None

    def _unreadable(self) -> IpuTuneError:
        return IpuTuneError(
            f"storage {redact(str(self.url), str(self.url))!r}: a trial's stored objective value "
            "is NULL where Optuna stores a number (an edited database: SQLite stores a NaN so, "
            "and Optuna fails a trial whose objective is NaN); allowed: values Optuna wrote")
