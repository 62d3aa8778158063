"""The tuner: an Optuna study in persistent storage, its workers, and the end-of-run exports."""

from ipu_tune.tuner._run import (
    Prepared,
    RunSummary,
    check_shared_studies,
    export_study,
    prepare,
    run,
)
from ipu_tune.tuner._study import (
    default_study_name,
    open_study,
    problem_fingerprint,
    problem_inputs,
    recover_stale_trials,
)

__all__ = [
    "Prepared",
    "RunSummary",
    "check_shared_studies",
    "default_study_name",
    "export_study",
    "open_study",
    "prepare",
    "problem_fingerprint",
    "problem_inputs",
    "recover_stale_trials",
    "run",
]
