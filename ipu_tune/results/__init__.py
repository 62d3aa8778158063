"""Results: the per-trial table, best-config export, framework programs and HTML report."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipu_tune.results._export import atomic_write, best_yaml_text, export_table, study_dir
    from ipu_tune.results._frameworks import EXPORT_FILES, write_exports
    from ipu_tune.results._popart import popart_snippet
    from ipu_tune.results._poprun import poprun_command, poprun_provenance
    from ipu_tune.results._poptorch import poptorch_snippet
    from ipu_tune.results._report import write_report
    from ipu_tune.results._store import PLAN_COLUMNS, TABLE_NAME, ResultsStore, row_from_trial
    from ipu_tune.results._tf import tf_snippet

# Each name loads its module on first use: the report pulls pandas and plotly, the store
# SQLAlchemy (~2 s together under load), and a command imports only what it uses (issue 16).
_LAZY = {
    "atomic_write": "_export",
    "best_yaml_text": "_export",
    "export_table": "_export",
    "study_dir": "_export",
    "EXPORT_FILES": "_frameworks",
    "write_exports": "_frameworks",
    "popart_snippet": "_popart",
    "poprun_command": "_poprun",
    "poprun_provenance": "_poprun",
    "poptorch_snippet": "_poptorch",
    "tf_snippet": "_tf",
    "write_report": "_report",
    "PLAN_COLUMNS": "_store",
    "TABLE_NAME": "_store",
    "ResultsStore": "_store",
    "row_from_trial": "_store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"ipu_tune.results.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ipu_tune.results' has no attribute {name!r}")


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
