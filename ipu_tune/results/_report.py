"""`report.html`: one self-contained, offline page about a study and its best plan.

plotly.js (read from the installed plotly package's data file) is inlined once, with the first
figure, and every later figure reuses it, so the page opens without network. The figures are
plain Plotly figure specs (`_figures`), so building the page imports neither plotly nor pandas
(issue 16: the report is part of every run's fixed cost). Every figure sits in
`<div class="figure" data-figure="NAME">`; a view that cannot be drawn (too few trials, no
feasible plan) becomes a `<div class="note">` instead.
"""

from __future__ import annotations

import html
import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from ipu_tune.config import EvalConfig
from ipu_tune.plan import plan_from_config
from ipu_tune.records import TrialRecord
from ipu_tune.simulator import SimResult

from ._figures import (
    Figure,
    history_figure,
    importances_figure,
    light_study,
    memory_figure,
    objective_history_figure,
    pareto_figure,
    phases_figure,
    plotly_js,
    plotly_js_bytes,
    timeline_figure,
    trials_figure,
)
from ._poptorch import poptorch_snippet
from ._table import SORT_JS, top_trials_table
from ._timeline import build_timeline

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["write_report"]

Rows = Sequence[Mapping[str, Any]]
# What plotly's `to_html` escapes in the JSON it puts inside <script> (plotly.io._json).
_JSON_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "/": "\\u002f",
                            "\u2028": "\\u2028", "\u2029": "\\u2029"})
_PLOT_CONFIG = json.dumps({"displaylogo": False, "responsive": True})
# Finished trials: COMPLETE (feasible, with values), PRUNED (infeasible: no value).
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.summary td, .plan td { padding: 2px 12px 2px 0; }
.plan-sections { display: flex; flex-wrap: wrap; gap: 0 3em; align-items: flex-start; }
.plan-sections h3 { margin: 0.4em 0; }
.note { background: #fff6e0; border-left: 4px solid #f0a000; padding: 0.6em 1em; }
.caption { color: #555; font-size: 0.9em; }
table.sortable { border-collapse: collapse; font-size: 0.85em; }
table.sortable th { cursor: pointer; background: #f3f3f3; position: sticky; top: 0; }
table.sortable th, table.sortable td { border: 1px solid #ddd; padding: 3px 6px; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
.table-wrap { max-height: 700px; overflow: auto; }
table.ladder { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0 1em; }
table.ladder th, table.ladder td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
table.ladder td.text, table.ladder th.text { text-align: left; }
tr.nofit td { color: #a00; } tr.exported td { background: #fff3c4; font-weight: 600; }
.headline { font-size: 1.1em; }
pre { background: #f6f8fa; padding: 1em; overflow: auto; font-size: 0.85em; }
"""


# Where plotly.js goes in a page's segments: the 4.8 MB bundle is written as the bytes of its
# file, never decoded, copied into the page's text and encoded again (~0.1 s, issue 16).
_PLOTLY_JS = None


class _Page:
    """Accumulates sections; plotly.js goes inline with the first figure only."""

    def __init__(self) -> None:
        self.parts: list[tuple[str | None, ...]] = []  # one per section: text, or plotly.js
        self.figures = 0

    def add(self, *segments: str | None) -> None:
        self.parts.append(segments)

    def heading(self, title: str, caption: str = "") -> None:
        self.add(f"<h2>{html.escape(title)}</h2>")
        if caption:
            self.add(f'<p class="caption">{html.escape(caption)}</p>')

    def note(self, name: str, text: str) -> None:
        self.add(f'<div class="note" data-note="{name}">{html.escape(text)}</div>')

    def figure(self, name: str, fig: Figure) -> None:
        """The figure's div and its `Plotly.newPlot` call, as plotly's `to_html` writes them."""
        div_id = f"plot-{name}"
        height = fig["layout"].get("height")
        style = f"height:{height}px; width:100%;" if height else "height:100%; width:100%;"
        head = f'<div class="figure" data-figure="{name}"><div style="{style}">'
        load: tuple[str | None, ...] = (
            "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script><script>",
            _PLOTLY_JS, "</script>") if self.figures == 0 else ()
        body = (
            f'<div id="{div_id}" class="plotly-graph-div" style="height:100%; width:100%;">'
            "</div><script>window.PLOTLYENV=window.PLOTLYENV || {};"
            f'if (document.getElementById("{div_id}")) {{Plotly.newPlot("{div_id}", '
            f"{_json(fig['data'])}, {_json(fig['layout'])}, {_PLOT_CONFIG})}};</script></div>"
            "</div>")
        self.figures += 1
        self.add(head, *load, body)

    def segments(self, title: str) -> list[str | None]:
        """The whole page: text segments, None where plotly.js goes."""
        out: list[str | None] = [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"]
        for i, part in enumerate(self.parts):
            out += ["\n", *part] if i else part
        out.append(f"<script>{SORT_JS}</script></body></html>\n")
        return out


def _json(value: Any) -> str:
    """JSON safe inside <script>; NaN and infinities are null (as plotly writes them)."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), separators=(",", ":"))
    return text.translate(_JSON_SAFE)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _records(results: Rows | pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of the results table as plain dicts (a DataFrame's missing values are None)."""
    rows: Any = results.to_dict("records") if hasattr(results, "to_dict") else results
    return [{str(k): None if isinstance(v, float) and math.isnan(v) else v
             for k, v in r.items()} for r in rows]


def _fits(row: Mapping[str, Any]) -> bool:
    return bool(row.get("fits"))


def _rows(pairs: list[tuple[str, Any]], css: str) -> str:
    cells = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in pairs
    )
    return f'<table class="{css}">{cells}</table>'


def _flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return [(prefix, value)]


def _summary(study: optuna.Study, results: Rows, best: SimResult | None,
             explanation: dict[str, Any] | None, best_trial: int | None) -> str:
    trials = study.get_trials(deepcopy=False)
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    pruned = sum(t.state == TrialState.PRUNED for t in trials)  # infeasible (no value)
    fitting = sum(_fits(r) for r in results)
    ex = explanation or {}
    objectives = ex.get("objectives") or []
    pairs: list[tuple[str, Any]] = [
        ("study", study.study_name),
        ("objectives", ", ".join(o["metric"] for o in objectives)
         or ", ".join(study.metric_names or [d.name.lower() for d in study.directions])),
        ("trials", f"{len(trials)} ({complete} complete, {pruned} infeasible (pruned), "
                   f"{fitting} fitting in memory)"),
    ]
    if best is not None:
        if best_trial is not None:
            pairs.append(("exported", f"trial {best_trial} ({ex.get('rule', 'the best')})"))
        for o in objectives:
            if o["best_shown"] is not None:
                pairs.append((o["axis"], o["best_shown"]))
        steps = ex.get("steps") or []
        if steps:
            first, last = steps[0], steps[-1]
            pairs.append(("speed-up over your plan",
                          f"x{last['throughput'] / first['throughput']:.2f}"
                          if first["fits"] and first["throughput"] > 0
                          else "your plan does not fit in memory"))
        named = {o["name"] for o in objectives}
        if "throughput" not in named:
            pairs.append(("throughput", f"{best.throughput:,.1f} samples/s"))
        if "latency" not in named:
            pairs.append(("latency per micro-batch", f"{best.latency_s * 1e3:.3f} ms"))
        pairs += [
            ("bottleneck", best.bottleneck),
            ("step time", f"{best.step_time_s * 1e3:.3f} ms"),
        ]
    return _rows(pairs, "summary")


def _cell(v: Any, css: str = "") -> str:
    c = f' class="{css}"' if css else ""
    return f"<td{c}>{html.escape(str(v))}</td>"


def _ladder_html(ex: dict[str, Any]) -> str:
    head = ("<tr><th>step</th><th class=text>change</th><th>fits</th>"
            "<th>peak MB per IPU (limit)</th><th>samples/s</th><th>speed-up</th>"
            "<th class=text>bottleneck</th></tr>")
    rows = []
    steps = ex.get("steps") or []
    for s in steps:
        css = "nofit" if not s["fits"] else ("exported" if s is steps[-1] else "")
        rows.append(
            f'<tr class="{css}">' + _cell(s["step"]) + _cell(s["change"], "text")
            + _cell("yes" if s["fits"] else "NO")
            + _cell(f"{s['peak_memory_bytes'] / 1e6:,.0f} ({s['memory_limit_bytes'] / 1e6:,.0f})")
            + _cell(f"{s['throughput']:,.0f}" if s["fits"] else "-")
            + _cell(f"x{s['speedup']:.2f}" if s["speedup"] is not None else "-")
            + _cell(s["bottleneck"], "text") + "</tr>")
    caption = (f"<caption>Steps ranked by: {html.escape(ex['ladder_rank'])}</caption>"
               if ex.get("ladder_rank") else "")
    return (f'<table class="ladder" data-table="ladder">{caption}{head}{"".join(rows)}'
            "</table>")


def _sensitivity_html(rows: list[dict[str, Any]]) -> str:
    head = ("<tr><th class=text>knob</th><th>value</th><th>fits</th><th>samples/s</th>"
            "<th>change</th><th>in search space</th></tr>")
    body = "".join(
        "<tr>" + _cell(r["knob"], "text") + _cell(r["value"])
        + _cell("yes" if r["fits"] else ("NO" if r["valid"] else "n/a"))
        + _cell(f"{r['throughput']:,.0f}" if r["fits"] else "-")
        + _cell(f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "-")
        + _cell("yes" if r.get("searched") else "no") + "</tr>"
        for r in rows)
    return f'<table class="ladder" data-table="sensitivity">{head}{body}</table>'


def _explain(page: _Page, ex: dict[str, Any] | None) -> None:
    if not ex:
        return
    closest = ex.get("closest")
    if ex.get("best_trial") is None:
        if closest:
            lines = [
                f"No plan fits. Closest: trial {closest['trial']}, peak "
                f"{closest['peak_memory_bytes'] / 1e6:,.0f} MB of "
                f"{closest['memory_limit_bytes'] / 1e6:,.0f} MB per IPU, over by "
                f"{closest['excess_bytes'] / 1e6:,.0f} MB: {closest['reason']}"]
            for r in closest.get("remedies") or []:
                verdict = (f"fits, {r['throughput']:,.0f} samples/s" if r["fits"]
                           else f"still does not fit ({r['memory']})")
                lines.append(f"{r['remedy']}: {verdict}")
            items = "".join(f"<li>{html.escape(x)}</li>" for x in lines[1:])
            page.add(f'<div class="note" data-note="no-fit"><p>{html.escape(lines[0])}</p>'
                     f"<p>Remedies the simulator checked on that plan:</p><ul>{items}</ul></div>")
        return
    page.heading(
        "How the best plan was reached",
        "From your plan to the exported best, one change at a time, the change that gains most "
        "first (each step simulated; speed-up over the first step that fits). Beside it, each "
        "knob of the best plan one step down and up.",
    )
    page.add('<div class="plan-sections"><div><h3>Ladder</h3>' + _ladder_html(ex) + "</div>"
             + "<div><h3>Sensitivity of the best plan</h3>"
             + _sensitivity_html(ex.get("sensitivity") or []) + "</div></div>")


def _section(cfg: EvalConfig, name: str, tokens: bool) -> dict[str, Any]:
    d = asdict(getattr(cfg, name))
    if name == "model" and tokens:
        d.pop("input_shape", None)  # image-only: a token model's input is its sequence length
    return d


def _best_plan(page: _Page, cfg: EvalConfig | None, result: SimResult | None,
               tokens: bool = False) -> None:
    page.heading("Best plan")
    if result is None or not result.fits:
        why = f" Closest plan: {result.reason}." if result is not None and result.reason else ""
        page.note(
            "no-feasible-plan",
            "No feasible plan: no trial found a plan that fits in memory, so there is no best"
            f" plan to export.{why}",
        )
    if cfg is not None:
        tables = "".join(
            f"<div><h3>{k}</h3>{_rows(_flatten('', _section(cfg, k, tokens)), 'plan')}</div>"
            for k in ("model", "workload", "system", "plan")
        )
        page.add(f'<div class="plan-sections">{tables}</div>')
    if result is None:
        return
    page.heading(
        "Memory by category per IPU",
        "Peak bytes on each IPU of one replica by PopVision memory category; the dashed line is"
        " the IPU's SRAM. Labels give the most loaded tile against one tile's SRAM.",
    )
    page.figure("memory", memory_figure(result))
    page.heading("Time by phase", "Seconds of one step by phase; the bottleneck in red.")
    page.figure("phases", phases_figure(result))
    page.heading(
        "Execution trace of one step",
        "Stages x time like PopVision's execution trace: F forward, B backward, R recompute per"
        " micro-batch, on-chip exchange in yellow; host time not hidden comes first, weight"
        " update last; grey bands are the pipeline ramp. Long steps are compressed: the ramps"
        " and a few steady slots are drawn, the title says how many repeat. A stylised"
        " schedule of the simulator's per-stage times.",
    )
    if cfg is None or not result.stages:
        page.note("timeline", "No execution trace: the plan's configuration or stages are missing.")
        return
    plan = plan_from_config(cfg)
    # Ramp up, a few steady slots, ramp down: the repeated steady slots in between are left
    # out (the title says how many), so any GA reads as clearly as GA 8.
    shown = 2 * max(1, plan.stages) + 4
    page.figure("timeline", timeline_figure(
        build_timeline(result, plan, max_micro_batches=shown), result.step_time_s))


def _points(study: optuna.Study, objectives: list[dict[str, Any]],
            names: Sequence[str]) -> list[dict[str, Any]]:
    """Trial, objective values in their shown units (under `names`; none for an infeasible
    trial, PRUNED without a value), feasible, reason."""
    rows = []
    for t in study.get_trials(deepcopy=False, states=_FINISHED):
        rec = TrialRecord.of(t)
        row: dict[str, Any] = {"trial": t.number, "feasible": rec.feasible and bool(t.values),
                               "reason": rec.reason or "infeasible"}
        for i, (o, name) in enumerate(zip(objectives, names, strict=False)):
            if t.values:
                row[name] = float(t.values[i]) * float(o["scale"])
        rows.append(row)
    return rows


def render_report(
    *,
    study: optuna.Study,
    results: Rows | pd.DataFrame,
    best_config: EvalConfig | None,
    best_result: SimResult | None,
    title: str,
    top_n: int = 50,
    snippet: str | None = None,
    explanation: dict[str, Any] | None = None,
    best_trial: int | None = None,
) -> str:
    """The report's HTML text (see `write_report`)."""
    segments = _page(study=study, results=results, best_config=best_config,
                     best_result=best_result, title=title, top_n=top_n, snippet=snippet,
                     explanation=explanation, best_trial=best_trial)
    return "".join(plotly_js() if s is _PLOTLY_JS else s for s in segments)


def _page(
    *,
    study: optuna.Study,
    results: Rows | pd.DataFrame,
    best_config: EvalConfig | None,
    best_result: SimResult | None,
    title: str,
    top_n: int = 50,
    snippet: str | None = None,
    explanation: dict[str, Any] | None = None,
    best_trial: int | None = None,
) -> list[str | None]:
    """The report's segments: HTML text, None where plotly.js goes (see `write_report`).

    `snippet` is the PopTorch snippet written beside best.yaml (built once by the exporter);
    when None it is built here from the best config and result. `results`: the rows of the
    results table (`ResultsStore.rows`), or its DataFrame (`ResultsStore.frame`).
    """
    results = _records(results)
    page = _Page()
    page.add(f"<h1>{html.escape(title)}</h1>")
    ex = explanation or {}
    page.add(_summary(study, results, best_result, explanation, best_trial))
    _explain(page, explanation)
    _best_plan(page, best_config, best_result, tokens=ex.get("input_kind") == "tokens")

    plots = light_study(study)  # Optuna's plots copy every trial per parameter: keep them light
    multi = len(study.directions) > 1
    has_complete = any(t.state in _FINISHED for t in study.get_trials(deepcopy=False))
    page.heading("Pareto front" if multi else "Optimisation history")
    objectives = ex.get("objectives") or []
    if not has_complete:
        page.note("history", "No finished trial yet: nothing to plot.")
    elif len(objectives) == len(study.directions) and len(objectives) in (1, 2):
        if multi:
            page.figure("pareto", pareto_figure(
                _points(study, objectives, ("x", "y")), [o["axis"] for o in objectives],
                [o["direction"] for o in objectives], best_trial))
        else:
            page.figure("history", objective_history_figure(
                _points(study, objectives, ("value",)), objectives[0]["axis"],
                objectives[0]["direction"], best_trial))
    else:
        page.figure("pareto" if multi else "history", history_figure(plots))
    page.heading("Parameter importances", "Optuna's PED-ANOVA importance of each searched knob.")
    fits_any = any(_fits(r) for r in results)
    # With no plan that fits no trial has an objective value (infeasible trials are PRUNED):
    # there is nothing to rank the knobs by.
    imp = (importances_figure(plots) if fits_any or not has_complete else
           "No plan fits: no trial has an objective value (infeasible trials are pruned), so "
           "no knob can be ranked by its importance. See the remedies above.")
    if isinstance(imp, str):
        page.note("importances", imp)
    else:
        page.figure("importances", imp)
    # Plans that do not fit have no throughput (NULL) but a peak memory: they are drawn too.
    if any(r.get("peak_memory_bytes") is not None and "fits" in r for r in results):
        page.heading("Trials", "Every finished trial: throughput against peak memory per IPU.")
        page.figure("trials", trials_figure(results, best_trial))
    page.heading(
        f"Top {top_n} trials",
        "By throughput, plans that fit first. Click a column header to sort.",
    )
    page.add(f'<div class="table-wrap">{top_trials_table(results, top_n, best_trial)}</div>')
    if best_config is not None:
        page.heading("PopTorch options", "The snippet written beside best.yaml.")
        if snippet is None:
            snippet = poptorch_snippet(best_config, best_result)
        page.add(f"<details><summary>show</summary><pre>{html.escape(snippet)}</pre></details>")
    return page.segments(title)


def write_report(
    path: Path,
    *,
    study: optuna.Study,
    results: Rows | pd.DataFrame,
    best_config: EvalConfig | None,
    best_result: SimResult | None,
    title: str,
    snippet: str | None = None,
    explanation: dict[str, Any] | None = None,
    best_trial: int | None = None,
) -> Path:
    """Write the HTML report atomically (temporary file + `os.replace`); returns `path`.

    `snippet`: the text of the written poptorch_options.py, embedded as it is."""
    segments = _page(
        study=study,
        results=results,
        best_config=best_config,
        best_result=best_result,
        title=title,
        snippet=snippet,
        explanation=explanation,
        best_trial=best_trial,
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for s in segments:
                f.write(plotly_js_bytes() if s is _PLOTLY_JS else s.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
