"""The tuner: an Optuna study in persistent storage, its workers, and the end-of-run exports."""

from ipu_tune.tuner._run import RunSummary, export_study, run
from ipu_tune.tuner._study import default_study_name, open_study, recover_stale_trials

__all__ = [
    "RunSummary",
    "default_study_name",
    "export_study",
    "open_study",
    "recover_stale_trials",
    "run",
]
