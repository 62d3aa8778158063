"""Exports of a study's best plan: best.yaml, the PopTorch, PopART and TensorFlow programs,
the PopRun line and, for Transformers models, optimum-graphcore's ipu_config.json with a program
that loads it; each an `Exporter` rendering one frozen `ExportContext`: the best plan's, or, for
a framework that cannot run its pipeline schedule, the best stored trial it can run
(`StoredTrials`)."""

from ipu_tune.exports._choose import StoredTrials
from ipu_tune.exports._context import BEST_YAML, ExportContext, Provenance, export_context
from ipu_tune.exports._ipu_config import (
    IPU_CONFIG_FIELDS,
    render_ipu_config,
    render_run_with_optimum,
)
from ipu_tune.exports._ipu_config_import import (
    apply_ipu_config,
    ipu_config_note,
    ipu_config_unsimulated,
    plan_values_from_ipu_config,
    read_ipu_config,
)
from ipu_tune.exports._optimum import optimum_note
from ipu_tune.exports._poprun import poprun_command
from ipu_tune.exports._registry import EXPORTERS, Exporter
from ipu_tune.exports._schedules import Schedules, StandIn
from ipu_tune.exports._write import (
    EXPORT_FILE_NAMES,
    Exports,
    prepare_exports,
    render_exports,
    write_exports,
)

__all__ = [
    "BEST_YAML",
    "EXPORTERS",
    "EXPORT_FILE_NAMES",
    "IPU_CONFIG_FIELDS",
    "ExportContext",
    "Exporter",
    "Exports",
    "Provenance",
    "Schedules",
    "StandIn",
    "StoredTrials",
    "apply_ipu_config",
    "export_context",
    "ipu_config_note",
    "ipu_config_unsimulated",
    "optimum_note",
    "plan_values_from_ipu_config",
    "poprun_command",
    "prepare_exports",
    "read_ipu_config",
    "render_exports",
    "render_ipu_config",
    "render_run_with_optimum",
    "write_exports",
]
