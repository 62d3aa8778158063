"""`report.html`: one self-contained, offline page about a study and its best plan.

plotly.js (read from the installed plotly package's data file) is inlined once, with the first
figure, and every later figure reuses it, so the page opens without network. The figures are
plain Plotly figure specs (`_figures`), so building the page imports neither plotly nor pandas
(the report is part of every run's fixed cost). Every figure sits in
`<div class="figure" data-figure="NAME">`; a view that cannot be drawn (too few trials, no
feasible plan) becomes a `<div class="note">` instead.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import optuna
from optuna.trial import TrialState

from ipu_tune.config import EvalConfig
from ipu_tune.explain import Explanation
from ipu_tune.files import atomic_write
from ipu_tune.knobs import ModelFacts, moot_keys
from ipu_tune.plan import plan_from_config
from ipu_tune.records import TrialRecord
from ipu_tune.search import OBJECTIVES, Objective
from ipu_tune.simulator import SimResult

from ._figures import memory_figure, phases_figure, plotly_js, plotly_js_bytes, timeline_figure
from ._page import PLOTLY_JS, Page
from ._sections import explain_section, fits, flatten, rows_table, summary_table
from ._study_figures import (
    closeness_figure,
    history_figure,
    importances_figure,
    light_study,
    objective_history_figure,
    pareto_figure,
    trials_figure,
)
from ._table import knob_values, top_trials_table
from ._timeline import build_timeline

if TYPE_CHECKING:  # typing names of Python 3.11 (the package runs on 3.10 too)
    from typing import NotRequired, Unpack

    import pandas as pd

__all__ = ["render_report", "report_bytes", "write_report"]

Rows = Sequence[Mapping[str, Any]]
# Finished trials: COMPLETE (feasible, with values), PRUNED (infeasible: no value).
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


class ReportInputs(TypedDict):
    """What a report shows: the study, its results-table rows (`ResultsStore.rows`, or its
    DataFrame), the best plan and its simulated result, the page title; `top_n` rows in the
    table; `snippet`, the PopTorch program written beside best.yaml (rendered once by
    `ipu_tune.exports`; None: no program section); the study's `explanation`; the exported
    `best_trial`."""

    study: optuna.Study
    results: Rows | pd.DataFrame
    best_config: EvalConfig | None
    best_result: SimResult | None
    title: str
    top_n: NotRequired[int]
    snippet: NotRequired[str | None]
    explanation: NotRequired[Explanation | None]
    best_trial: NotRequired[int | None]

def _records(results: Rows | pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of the results table as plain dicts (a DataFrame's missing values are None)."""
    rows: Any = results.to_dict("records") if hasattr(results, "to_dict") else results
    return [{str(k): None if isinstance(v, float) and math.isnan(v) else v
             for k, v in r.items()} for r in rows]


def _section(cfg: EvalConfig, name: str, tokens: bool,
             moot: frozenset[str] = frozenset()) -> dict[str, Any]:
    d = asdict(getattr(cfg, name))
    if name == "model" and tokens:
        # image-only: a token or audio model's input comes from its sequence length or config
        d.pop("input_shape", None)
    for key in moot:  # knobs the plan does not run (as its plan line: `knobs.describe`)
        section, _, rest = key.partition(".")
        *parents, leaf = rest.split(".")
        node = d if section == name else {}
        for part in parents:
            node = node.get(part, {})
        node.pop(leaf, None)
    return d


def _row_moot(study: optuna.Study, cfg: EvalConfig | None,
              model: ModelFacts | None) -> Callable[[Mapping[str, Any]], frozenset[str]]:
    """The knobs a results row's plan does not run (`knobs.moot_keys`); the dataset, not a
    column, is the study's: read from the best plan or, when none fits, a finished trial."""
    dataset: Any = None
    if cfg is not None:
        dataset = cfg.model.dataset.name
    else:
        for t in study.get_trials(deepcopy=False, states=_FINISHED):
            plain = TrialRecord.of(t).config
            if plain:
                dataset = (plain.get("model", {}).get("dataset", {}) or {}).get("name")
                break

    def moot(row: Mapping[str, Any]) -> frozenset[str]:
        return moot_keys({**knob_values(row), "model.dataset.name": dataset}, model)

    return moot


def _objectives(study: optuna.Study, ex: Explanation | None) -> list[Objective]:
    """The study's objectives, in order: the explanation's, else the study's metric names."""
    if ex is not None:
        return [OBJECTIVES[o["name"]] for o in ex.objectives if o["name"] in OBJECTIVES]
    by_metric = {o.metric: o for o in OBJECTIVES.values()}
    return [by_metric[m] for m in study.metric_names or [] if m in by_metric]


def _best_plan(page: Page, cfg: EvalConfig | None, result: SimResult | None,
               tokens: bool = False, moot: frozenset[str] = frozenset()) -> None:
    page.heading("Best plan")
    if result is None or not result.fits:
        why = f" Closest plan: {result.reason}." if result is not None and result.reason else ""
        page.note(
            "no-feasible-plan",
            "No feasible plan: no trial found a plan that fits in memory and meets the search's"
            " other constraints (a preset's global batch or throughput floor), so there is no"
            f" best plan to export.{why}",
        )
    if cfg is not None:
        tables = "".join(
            f"<div><h3>{k}</h3>{rows_table(flatten('', _section(cfg, k, tokens, moot)), 'plan')}"
            "</div>"
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
    page.heading("Time by phase", "Milliseconds of one step by phase; the bottleneck in red.")
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


def _points(study: optuna.Study, objectives: Sequence[Mapping[str, Any]],
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


def render_report(**inputs: Unpack[ReportInputs]) -> str:
    """The report's HTML text (see `write_report`)."""
    segments = _page(**inputs)
    return "".join(plotly_js() if s is PLOTLY_JS else s for s in segments)


def _search_figures(page: Page, study: optuna.Study, results: list[dict[str, Any]],
                    objectives: Sequence[Mapping[str, Any]], best_trial: int | None) -> None:
    """The history (or Pareto front), the knobs' importances and the trials' scatter."""
    plots = light_study(study)  # Optuna's plots copy every trial per parameter: keep them light
    multi = len(study.directions) > 1
    has_complete = any(t.state in _FINISHED for t in study.get_trials(deepcopy=False))
    page.heading("Pareto front" if multi else "Optimisation history")
    if not has_complete:
        page.note("history", "No finished trial yet: nothing to plot.")
    elif not any(fits(r) for r in results) and results:
        # No trial has an objective value: how close the search came to fitting instead.
        page.figure("history", closeness_figure(results))
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
    fits_any = any(fits(r) for r in results)
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


def _top_caption(first: Objective | None) -> str:
    """How the trials table is ordered: by the study's first objective, as it was searched."""
    o = first or OBJECTIVES["throughput"]
    best = "highest" if o.direction == "maximize" else "lowest"
    return (f"By {o.title} ({best} first), plans that fit first; plans that do not fit by peak "
            "memory, the closest to fitting first. Click a column header to sort.")


def _page(**inputs: Unpack[ReportInputs]) -> list[str | None]:
    """The report's segments: HTML text, None where plotly.js goes (see `write_report`)."""
    study, title = inputs["study"], inputs["title"]
    best_config, best_result = inputs["best_config"], inputs["best_result"]
    top_n, snippet = inputs.get("top_n", 50), inputs.get("snippet")
    explanation, best_trial = inputs.get("explanation"), inputs.get("best_trial")
    results = _records(inputs["results"])
    page = Page()
    page.add(f"<h1>{html.escape(title)}</h1>")
    page.add(summary_table(study, results, best_result, explanation, best_trial))
    explain_section(page, explanation)
    model = explanation.model if explanation is not None else None
    kind = model.input_kind if model is not None else None
    _best_plan(page, best_config, best_result, tokens=kind not in (None, "image"),
               moot=moot_keys(best_config, model) if best_config is not None else frozenset())

    _search_figures(page, study, results,
                    explanation.objectives if explanation is not None else (), best_trial)
    objectives = _objectives(study, explanation)
    page.heading(f"Top {top_n} trials", _top_caption(objectives[0] if objectives else None))
    table = top_trials_table(results, top_n, best_trial, objectives,
                             _row_moot(study, best_config, model))
    page.add(f'<div class="table-wrap">{table}</div>')
    if snippet is not None:
        page.heading("PopTorch options", "The snippet written beside best.yaml.")
        page.add(f"<details><summary>show</summary><pre>{html.escape(snippet)}</pre></details>")
    return page.segments(title)


def report_bytes(**inputs: Unpack[ReportInputs]) -> bytes:
    """The report as the bytes of report.html (plotly.js inlined), for a caller that writes it
    with other files as one set (`ipu_tune.files.write_files`)."""
    return b"".join(plotly_js_bytes() if s is PLOTLY_JS else s.encode("utf-8")
                    for s in _page(**inputs))


def write_report(path: Path, **inputs: Unpack[ReportInputs]) -> Path:
    """Write the HTML report whole (`ipu_tune.files.atomic_write`); returns `path`."""
    return atomic_write(Path(path), report_bytes(**inputs), key="report")
