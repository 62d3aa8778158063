"""Plotly figures of the report: PopVision-like views of the best plan and of the study.

PopVision's Graph Analyser shows memory per IPU by category and an execution trace over time
(Graphcore's PopVision Graph Analyser user guide); `memory_figure` and `timeline_figure` are
those two views of a simulated plan. The study views (history, Pareto front, trials,
importances) are in `_study_figures`.

Each figure is a plain Plotly figure spec (`{"data": [...], "layout": {...}}`, what Plotly.js
reads), not a `plotly.graph_objects.Figure`: building and validating those took about a second
per report, and importing them another. The spec follows the Plotly.js schema (the
tests validate every figure against `plotly.graph_objects`); the layout template and plotly.js
itself are read from the installed plotly package's data files, without importing plotly.

Text from a study (its knobs, metric names, a stored result's bottleneck and reason) is the
attacker's when the study lives in a shared storage: every such text goes into a figure through
`ipu_tune._escape.plotly_text`, so Plotly.js draws it as it is (no link, style or hover-template
field of its own); the figures' own text (titles, units, `<br>`) is written as Plotly reads it.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ipu_tune._escape import plotly_text
from ipu_tune.errors import IpuTuneError
from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES, SimResult

from ._timeline import HOST_LANE, SEGMENT_KINDS, Timeline

__all__ = [
    "Figure",
    "memory_figure",
    "phases_figure",
    "plotly_js",
    "plotly_js_bytes",
    "timeline_figure",
]

# A Plotly figure spec as Plotly.js reads it: {"data": [trace, ...], "layout": {...}}.
Figure = dict[str, Any]
Row = Mapping[str, Any]

# Decimal units, as the run summary, `evaluate`, the tables and the exports print them.
_MB = 1e6
_KB = 1e3

# One colour per memory category, the same in every report whichever categories it shows
# (plotly's default colours follow the order of the traces drawn, so they would shift).
CATEGORY_COLORS = dict(zip(MEMORY_CATEGORIES, (
    "#7f7f7f", "#c7c7c7", "#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#e377c2", "#2ca02c",
    "#bcbd22", "#17becf", "#8c564b"), strict=True))

# Forward green and backward red as in the execution report of Graphcore's PopTorch
# pipelining tutorial.
KIND_COLORS = {
    "forward": "#2ca02c",
    "backward": "#d62728",
    "recompute": "#ff7f0e",
    "exchange": "#f2c80f",  # on-chip exchange: its own colour, as PopVision's trace
    "inter_ipu": "#7f7f7f",
    "all_reduce_pod": "#17becf",
    "all_reduce_gw": "#aec7e8",
    "streaming_memory": "#8c564b",
    "weight_update": "#9467bd",
    "host_preprocess": "#bcbd22",
    "host_io": "#1f77b4",
    "host_overhead": "#e377c2",
}
_KIND_LABELS = {"forward": "F", "backward": "B", "recompute": "R"}
_MARGIN = {"l": 70, "r": 30, "t": 60, "b": 50}


# -- the installed plotly package's data files (plotly.js, layout templates) -------------------

@cache
def _plotly_data() -> Path:
    """plotly's `package_data` folder, found without importing plotly (~0.5 s)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise IpuTuneError("report: the plotly package is not installed (pip install plotly)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


@cache
def plotly_js_bytes() -> bytes:
    """The plotly.js bundle that ships with the installed plotly (what `get_plotlyjs()` reads),
    as the bytes of its file (UTF-8)."""
    return (_plotly_data() / "plotly.min.js").read_bytes()


def plotly_js() -> str:
    """`plotly_js_bytes` as text."""
    return plotly_js_bytes().decode("utf-8")


@cache
def _template_text(name: str) -> str:
    return (_plotly_data() / "templates" / f"{name}.json").read_text(encoding="utf-8")


def _template(name: str) -> dict[str, Any]:
    """A Plotly layout template by name (Plotly.js knows templates only as objects)."""
    found: dict[str, Any] = json.loads(_template_text(name))
    return found


def _layout(title: str, **layout: Any) -> dict[str, Any]:
    """The report's layout: a white template, room for axis titles, and `title`."""
    return {"template": _template("plotly_white"), "margin": dict(_MARGIN),
            "title": {"text": title}, **layout}


def _title(text: str) -> dict[str, Any]:
    return {"title": {"text": text}}


def _num(value: Any) -> float | None:
    """A float, or None for a missing value (None, NaN) of a results row."""
    if value is None:
        return None
    f = float(value)
    return None if math.isnan(f) else f


def _flag(value: Any) -> bool:
    """A results row's boolean: None and NaN (unknown) are False."""
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and bool(
        value)


def _hline(y: float, text: str, line: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A horizontal line across the plot at `y`, labelled at its top left (plotly's add_hline)."""
    shape = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y,
             "y1": y, "line": line}
    note = {"showarrow": False, "text": text, "xref": "x domain", "x": 0, "xanchor": "left",
            "yref": "y", "y": y, "yanchor": "bottom"}
    return shape, note


def _vline(x: float, text: str, line: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A vertical line across the plot at `x`, labelled at its top (plotly's add_vline)."""
    shape = {"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain", "y0": 0,
             "y1": 1, "line": line}
    note = {"showarrow": False, "text": text, "xref": "x", "x": x, "xanchor": "left",
            "yref": "y domain", "y": 1, "yanchor": "top"}
    return shape, note


# -- the best plan ----------------------------------------------------------------------------

def memory_figure(result: SimResult) -> Figure:
    """Stacked bytes by category on each IPU of one replica, against the SRAM limit."""
    x = [f"IPU{m.ipu} (stage {m.stage})" for m in result.memory]
    data = []
    for cat in MEMORY_CATEGORIES:
        values = [m.categories.get(cat, 0) / _MB for m in result.memory]
        if not any(values):
            continue  # a category no IPU uses only clutters the legend
        data.append({"type": "bar", "name": cat, "x": x, "y": values,
                     "marker": {"color": CATEGORY_COLORS[cat]},
                     "hovertemplate": f"{cat}: %{{y:.1f}} MB<extra>%{{x}}</extra>"})
    limit_mb = result.memory_limit_bytes / _MB
    shape, limit_note = _hline(limit_mb, f"SRAM limit {limit_mb:.0f} MB",
                               {"color": "black", "dash": "dash", "width": 2})
    # The program fails when any tile overflows, not only the IPU total (seed guide ch. 5).
    totals = [
        {"x": xi, "y": m.total_bytes / _MB, "showarrow": False, "yshift": 12,
         "text": (f"{m.total_bytes / _MB:.0f} MB · max tile "
                  f"{m.max_tile_bytes / _KB:.0f}/{m.tile_limit_bytes / _KB:.0f} kB")}
        for xi, m in zip(x, result.memory, strict=True)
    ]
    status = "fits" if result.fits else f"does not fit: {plotly_text(result.reason)}"
    return {"data": data, "layout": _layout(
        f"Memory by category per IPU ({status})", barmode="stack",
        yaxis=_title("memory per IPU (MB)"), legend=_title("category"), shapes=[shape],
        annotations=[limit_note, *totals])}


def phases_figure(result: SimResult) -> Figure:
    """Seconds per step by phase; the bottleneck phase is highlighted."""
    phases = [p for p in TIME_PHASES if result.phases.get(p, 0.0) > 0] or list(TIME_PHASES)
    ms = [result.phases.get(p, 0.0) * 1e3 for p in phases]
    colors = ["#d62728" if p == result.bottleneck else "#1f77b4" for p in phases]
    bar = {"type": "bar", "x": ms, "y": phases, "orientation": "h", "marker": {"color": colors},
           "hovertemplate": "%{y}: %{x:.3f} ms<extra></extra>"}
    return {"data": [bar], "layout": _layout(
        f"Time by phase per step: {result.step_time_s * 1e3:.2f} ms, "
        f"bottleneck {plotly_text(result.bottleneck)}",
        xaxis=_title("ms per step"), yaxis={"autorange": "reversed"}, height=380)}


def timeline_figure(timeline: Timeline, step_time_s: float) -> Figure:
    """Execution-trace view: one horizontal lane per IPU plus the host, time in ms."""
    data = []
    for kind in SEGMENT_KINDS:
        segs = [s for s in timeline.segments if s.kind == kind]
        if not segs:
            continue
        label = _KIND_LABELS.get(kind, "")
        # One trace per kind (not per segment) keeps a long schedule light in the HTML.
        data.append({
            "type": "bar", "name": kind, "orientation": "h",
            "y": [s.lane for s in segs],
            "base": [s.start_s * 1e3 for s in segs],
            "x": [s.duration_s * 1e3 for s in segs],
            "marker": {"color": KIND_COLORS[kind], "line": {"width": 0.5, "color": "white"}},
            "text": [f"{label}{s.micro_batch}" if label else "" for s in segs],
            "textposition": "inside", "insidetextanchor": "middle",
            "customdata": [[s.micro_batch, s.start_s * 1e3] for s in segs],
            "hovertemplate": (
                f"{kind}<br>micro-batch %{{customdata[0]}}<br>start %{{customdata[1]:.3f}} ms"
                "<br>%{x:.3f} ms<extra>%{y}</extra>"),
        })
    shapes, notes = [], []
    for (x0, x1), name in ((timeline.ramp_up_s, "ramp up"), (timeline.ramp_down_s, "ramp down")):
        if x1 > x0:  # a grey band behind the bars (plotly's add_vrect)
            shapes.append({"type": "rect", "xref": "x", "x0": x0 * 1e3, "x1": x1 * 1e3,
                           "yref": "y domain", "y0": 0, "y1": 1, "fillcolor": "#888888",
                           "opacity": 0.12, "line": {"width": 0}, "layer": "below"})
            notes.append({"showarrow": False, "text": name, "xref": "x", "x": x0 * 1e3,
                          "xanchor": "left", "yref": "y domain", "y": 1, "yanchor": "top"})
    shown = timeline.micro_batches_shown
    per_step = timeline.micro_batches_per_step
    elided = ("" if shown == per_step else
              f" (steady state compressed: {shown} of {per_step} micro-batches drawn, the other"
              f" {per_step - shown} repeat the same slot)")
    span = "One step" if timeline.steps == 1 else f"One call ({timeline.steps} steps)"
    simulated = step_time_s * timeline.steps
    assert timeline.lanes[0] == HOST_LANE
    # The title in two short lines and the legend below the plot: on one line, a long
    # title ran under the legend and out of the figure.
    layout = _layout(
        f"{span}, {plotly_text(timeline.schedule)} schedule: trace {timeline.total_s * 1e3:.2f}"
        f" ms, simulated {simulated * 1e3:.2f} ms" + (f"<br><sub>{elided.strip()}</sub>"
                                                      if elided else ""),
        barmode="overlay", bargap=0.25, xaxis=_title("time (ms)"),
        yaxis={"categoryorder": "array", "categoryarray": list(timeline.lanes),
               "autorange": "reversed"},
        uniformtext={"minsize": 8, "mode": "hide"},
        height=max(300, 70 * len(timeline.lanes) + 180),
        legend={**_title("work"), "orientation": "h", "yanchor": "top", "y": -0.22,
                "xanchor": "left", "x": 0})
    if shapes:
        layout.update(shapes=shapes, annotations=notes)
    return {"data": data, "layout": layout}
