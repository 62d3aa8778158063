"""The report's tables: the study summary, the ladder from the user's plan, the sensitivity."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from ipu_tune.explain import (
    INVALID_PLAN,
    Explanation,
    invalid_start,
    objective_title,
    remedy_command,
)
from ipu_tune.knobs import rate_number, rate_text
from ipu_tune.simulator import SimResult

from ._page import Page

__all__ = ["explain_section", "fits", "flatten", "rows_table", "summary_table"]

Rows = Sequence[Mapping[str, Any]]


def fits(row: Mapping[str, Any]) -> bool:
    return bool(row.get("fits"))


def rows_table(pairs: list[tuple[str, Any]], css: str) -> str:
    cells = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in pairs
    )
    return f'<table class="{css}">{cells}</table>'


def flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            out += flatten(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return [(prefix, value)]


def summary_table(study: optuna.Study, results: Rows, best: SimResult | None,
             ex: Explanation | None, best_trial: int | None) -> str:
    trials = study.get_trials(deepcopy=False)
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    pruned = sum(t.state == TrialState.PRUNED for t in trials)  # infeasible (no value)
    fitting = sum(fits(r) for r in results)
    objectives = ex.objectives if ex is not None else ()
    pairs: list[tuple[str, Any]] = [
        ("study", study.study_name),
        ("objectives", ", ".join(o["metric"] for o in objectives)
         or ", ".join(study.metric_names or [d.name.lower() for d in study.directions])),
        ("trials", f"{len(trials)} ({complete} complete, {pruned} infeasible (pruned), "
                   f"{fitting} fitting in memory)"),
    ]
    if best is not None:
        if best_trial is not None:
            rule = ex.rule if ex is not None else "the best"
            pairs.append(("exported", f"trial {best_trial} ({rule})"))
        for o in objectives:
            if o["best_shown"] is not None:
                pairs.append((o["axis"], o["best_shown"]))
        steps = ex.steps if ex is not None else ()
        if steps:
            first, last = steps[0], steps[-1]
            # An invalid starting plan says why; a valid one that does not fit says so.
            no_speedup = ((invalid_start(ex) if ex is not None else "")
                          or "none: your plan does not fit in memory")
            pairs.append(("speed-up over your plan",
                          f"x{last['throughput'] / first['throughput']:.2f}"
                          if first["fits"] and first["throughput"] > 0 else no_speedup))
        named = {o["name"] for o in objectives}
        if "throughput" not in named:
            pairs.append(("throughput", rate_text(best.throughput)))
        if "latency" not in named:
            pairs.append(("latency per call", f"{best.latency_s * 1e3:.3f} ms"))
        pairs += [
            ("bottleneck", best.bottleneck),
            ("step time", f"{best.step_time_s * 1e3:.3f} ms"),
        ]
    return rows_table(pairs, "summary")


def _cell(v: Any, css: str = "") -> str:
    c = f' class="{css}"' if css else ""
    return f"<td{c}>{html.escape(str(v))}</td>"


def _ladder_html(ex: Explanation) -> str:
    steps = ex.steps
    # A study whose first objective is not throughput (latency): its value beside samples/s,
    # as `explain` prints it; each value carries its unit.
    title = objective_title(steps[0]) if steps else ""
    extra = f"<th>{html.escape(title)}</th>" if title else ""
    head = ("<tr><th>step</th><th class=text>change</th><th>fits</th>"
            f"<th>peak MB per IPU (limit)</th><th>samples/s</th><th>speed-up</th>{extra}"
            "<th class=text>bottleneck</th></tr>")
    rows = []
    for s in steps:
        css = "nofit" if not s["fits"] else ("exported" if s is steps[-1] else "")
        # An invalid plan is not simulated: it has no memory, and fitting does not apply.
        invalid = s["bottleneck"] == INVALID_PLAN
        rows.append(
            f'<tr class="{css}">' + _cell(s["step"]) + _cell(s["change"], "text")
            + _cell("yes" if s["fits"] else ("n/a" if invalid else "NO"))
            + _cell("n/a" if invalid else f"{s['peak_memory_bytes'] / 1e6:,.0f}"
                                          f" ({s['memory_limit_bytes'] / 1e6:,.0f})")
            + _cell(rate_number(s['throughput']) if s["fits"] else "-")
            + _cell(f"x{s['speedup']:.2f}" if s["speedup"] is not None else "-")
            + (_cell(s["objective_shown"] if s["fits"] else "-") if title else "")
            + _cell(s["bottleneck"], "text") + "</tr>")
    caption = (f"<caption>Steps ranked by: {html.escape(ex.ladder_rank)}</caption>"
               if ex.ladder_rank else "")
    return (f'<table class="ladder" data-table="ladder">{caption}{head}{"".join(rows)}'
            "</table>")


def _objective_cells(r: Mapping[str, Any]) -> str:
    """A sensitivity row's objective (with its unit) and its change against the best plan."""
    pct = r.get("objective_change_pct")
    return (_cell(r.get("objective_shown", "-"))
            + _cell(f"{pct:+.1f}%" if pct is not None else "-"))


def _sensitivity_html(rows: Sequence[Mapping[str, Any]]) -> str:
    title = objective_title(rows[0]) if rows else ""  # as in the ladder
    extra = f"<th>{html.escape(title)}</th><th>change</th>" if title else ""
    head = ("<tr><th class=text>knob</th><th>value</th><th>fits</th><th>samples/s</th>"
            f"<th>change</th>{extra}<th>in search space</th></tr>")
    body = "".join(
        "<tr>" + _cell(r["knob"], "text") + _cell(r["value"])
        + _cell("yes" if r["fits"] else ("NO" if r["valid"] else "n/a"))
        + _cell(rate_number(r['throughput']) if r["fits"] else "-")
        + _cell(f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "-")
        + (_objective_cells(r) if title else "")
        + _cell("yes" if r.get("searched") else "no") + "</tr>"
        for r in rows)
    return f'<table class="ladder" data-table="sensitivity">{head}{body}</table>'


def explain_section(page: Page, ex: Explanation | None) -> None:
    if not ex:
        return
    closest = ex.closest
    if ex.best_trial is None:
        if closest:
            head = closest.headline.split(":")[0]
            lines = [f"{head[0].upper()}{head[1:]}. Closest: {closest.describe()}"]
            for r in closest.remedies:
                verdict = (f"fits, {rate_text(r['throughput'])}" if r["fits"]
                           else f"still does not fit ({r['memory']})")
                add = list(r.get("overrides", ()))
                lines.append(f"{r['remedy']}: {verdict}"
                             + (f"; {remedy_command(add, None)}" if add else ""))
            items = "".join(f"<li>{html.escape(x)}</li>" for x in lines[1:])
            remedies = ("<p>Remedies, each simulated (what fits with the fewest changes first):"
                        f"</p><ul>{items}</ul>") if items else ""
            page.add(f'<div class="note" data-note="no-fit"><p>{html.escape(lines[0])}</p>'
                     f"{remedies}</div>")
        return
    page.heading(
        "How the best plan was reached",
        "From your plan to the exported best, one change at a time, the change that gains most "
        "first (each step simulated; speed-up over the first step that fits). Beside it, each "
        "knob of the best plan one step down and up.",
    )
    page.add('<div class="plan-sections"><div><h3>Ladder</h3>' + _ladder_html(ex) + "</div>"
             + "<div><h3>Sensitivity of the best plan</h3>"
             + _sensitivity_html(ex.sensitivity) + "</div></div>")


