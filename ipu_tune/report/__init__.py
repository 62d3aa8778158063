"""The HTML report of a study: one self-contained, offline page about the study and its best plan.

Building it imports neither plotly nor pandas (its figures are plain Plotly specs).
"""

from ipu_tune.report._figures import CATEGORY_COLORS, KIND_COLORS, memory_figure, timeline_figure
from ipu_tune.report._report import render_report, report_bytes, write_report
from ipu_tune.report._study_figures import importances_figure, light_study, trials_figure
from ipu_tune.report._timeline import HOST_LANE, Segment, Timeline, build_timeline

__all__ = [
    "CATEGORY_COLORS",
    "HOST_LANE",
    "KIND_COLORS",
    "Segment",
    "Timeline",
    "build_timeline",
    "importances_figure",
    "light_study",
    "memory_figure",
    "render_report",
    "report_bytes",
    "timeline_figure",
    "trials_figure",
    "write_report",
]
