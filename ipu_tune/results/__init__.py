"""Results: the per-trial table, best-config export, framework programs and HTML report."""

from ipu_tune.results._export import atomic_write, best_yaml_text, export_table, study_dir
from ipu_tune.results._frameworks import EXPORT_FILES, write_exports
from ipu_tune.results._popart import popart_snippet
from ipu_tune.results._poprun import poprun_command, poprun_provenance
from ipu_tune.results._poptorch import poptorch_snippet
from ipu_tune.results._report import write_report
from ipu_tune.results._store import PLAN_COLUMNS, TABLE_NAME, ResultsStore, row_from_trial
from ipu_tune.results._tf import tf_snippet

__all__ = [
    "EXPORT_FILES",
    "PLAN_COLUMNS",
    "TABLE_NAME",
    "ResultsStore",
    "atomic_write",
    "best_yaml_text",
    "export_table",
    "popart_snippet",
    "poprun_command",
    "poprun_provenance",
    "poptorch_snippet",
    "row_from_trial",
    "study_dir",
    "tf_snippet",
    "write_exports",
    "write_report",
]
