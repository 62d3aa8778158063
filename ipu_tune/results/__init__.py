"""Results: the per-trial table, best-config export, PopTorch snippet and HTML report."""

from ipu_tune.results._export import atomic_write, best_yaml_text, export_table, study_dir
from ipu_tune.results._poptorch import poptorch_snippet
from ipu_tune.results._report import write_report
from ipu_tune.results._store import PLAN_COLUMNS, TABLE_NAME, ResultsStore, row_from_trial

__all__ = [
    "PLAN_COLUMNS",
    "TABLE_NAME",
    "ResultsStore",
    "atomic_write",
    "best_yaml_text",
    "export_table",
    "poptorch_snippet",
    "row_from_trial",
    "study_dir",
    "write_report",
]
