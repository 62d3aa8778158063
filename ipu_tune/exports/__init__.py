"""Exports of a study's best plan: best.yaml, the PopTorch, PopART and TensorFlow programs and
the PopRun line, each an `Exporter` rendering one frozen `ExportContext`."""

from ipu_tune.exports._context import ExportContext, Provenance, export_context
from ipu_tune.exports._poprun import poprun_command
from ipu_tune.exports._registry import EXPORTERS, Exporter
from ipu_tune.exports._write import Exports, render_exports, write_exports

__all__ = [
    "EXPORTERS",
    "ExportContext",
    "Exporter",
    "Exports",
    "Provenance",
    "export_context",
    "poprun_command",
    "render_exports",
    "write_exports",
]
