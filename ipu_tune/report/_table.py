"""The report's table of top trials: plain HTML, sortable by clicking a header (inline JS)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ipu_tune.knobs import KNOBS
from ipu_tune.search import Objective

__all__ = ["SORT_JS", "knob_values", "top_trials_table"]

# (column of the results table, header). Missing columns are skipped, so older tables still work.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("trial_number", "trial"),
    ("throughput", "samples/s"),
    ("fits", "fits"),
    ("peak_memory_bytes", "peak MB/IPU"),
    ("bottleneck", "bottleneck"),
    *((k.column, k.header) for k in KNOBS if k.header),
)

_BOOL_COLUMNS = frozenset({"fits", *(k.column for k in KNOBS if k.type is bool)})
_LIST_COLUMNS = frozenset(k.column for k in KNOBS if k.type is tuple)

# Sorts on each cell's data-v (numeric when both parse as numbers); a second click reverses.
SORT_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].dataset.v, y = b.cells[col].dataset.v;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def _cell(column: str, value: Any) -> tuple[str, str]:
    """(sort key, display text) of one cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "", ""
    if column in _LIST_COLUMNS:
        splits = json.loads(value) if isinstance(value, str) else list(value)
        return str(len(splits)), ", ".join(splits) or "-"
    if column == "peak_memory_bytes":
        return str(int(value)), f"{int(value) / 1e6:.0f}"
    if column == "throughput":
        return repr(float(value)), f"{float(value):,.1f}"
    if column in _BOOL_COLUMNS:
        flag = str(value).lower() in ("true", "1")
        return str(int(flag)), "yes" if flag else "no"
    return str(value), str(value)


def knob_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs of a results-table row by dotted key (lists parsed; missing ones left out)."""
    out = {}
    for k in KNOBS:
        value = row.get(k.column)
        if not _missing(value):
            out[k.key] = json.loads(value) if k.column in _LIST_COLUMNS and isinstance(
                value, str) else value
    return out


def _no_moot(row: Mapping[str, Any]) -> frozenset[str]:
    return frozenset()


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> float | None:
    return None if _missing(value) else float(value)


def _objective_value(row: Mapping[str, Any], i: int) -> float | None:
    """The trial's `i`-th objective value as stored (the `values` column: JSON; None for an
    infeasible trial, which has none)."""
    values = row.get("values")
    if values is None or _missing(values):
        return None
    got = json.loads(values) if isinstance(values, str) else list(values)
    return float(got[i]) if i < len(got) and got[i] is not None else None


def _ranker(first: Objective | None) -> Callable[[Mapping[str, Any]], tuple[bool, bool, float]]:
    """Sort key: plans that fit first, by the study's first objective, best first (throughput
    when the study has none named); then fitting plans without its value (another constraint
    missed) by throughput; plans that do not fit by peak memory, the closest to fitting first."""
    by_throughput = first is None or first.name == "throughput"
    sign = -1.0 if first is None or first.direction == "maximize" else 1.0

    def rank(row: Mapping[str, Any]) -> tuple[bool, bool, float]:
        tp = _number(row.get("throughput"))
        fits = not _missing(row.get("fits")) and bool(row.get("fits"))
        value = tp if by_throughput else _objective_value(row, 0)
        if value is not None:
            return (not fits, False, sign * value)
        if fits and tp is not None:
            return (False, True, -tp)
        peak = _number(row.get("peak_memory_bytes"))
        return (True, True, float("inf") if peak is None else peak)

    return rank


def _objective_columns(objectives: Sequence[Objective],
                       rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """(header, cell HTML per row) of each objective other than throughput (samples/s has its
    own column): its value in the shown unit, named in the header."""
    out = []
    for i, o in enumerate(objectives):
        if o.name == "throughput":
            continue
        cells = []
        for row in rows:
            v = _objective_value(row, i)
            key, text = ("", "-") if v is None else (repr(v), o.fmt(v * o.scale))
            cells.append(f'<td data-v="{html.escape(key)}">{html.escape(text)}</td>')
        out.append((o.axis(), cells))
    return out


def _head_rows(results: Sequence[Mapping[str, Any]], top_n: int, exported: int | None,
               first: Objective | None) -> list[Mapping[str, Any]]:
    """The `top_n` finished trials by `_ranker`; the exported one kept when it is not among
    them (first)."""
    columns = set().union(*(r.keys() for r in results)) if results else set()
    # PRUNED: infeasible, no objective value (ranked after the plans that fit)
    rows_in = [r for r in results if "state" not in r or r["state"] in ("COMPLETE", "PRUNED")]
    if "throughput" in columns or "values" in columns:
        rows_in = sorted(rows_in, key=_ranker(first))  # stable: the table's order among equals
    head_rows = rows_in[:top_n]
    if exported is not None and "trial_number" in columns:
        mine = [r for r in rows_in if r.get("trial_number") == exported]
        if mine and all(r.get("trial_number") != exported for r in head_rows):
            head_rows = [*mine, *head_rows[: top_n - 1]]
    return head_rows


def top_trials_table(results: Sequence[Mapping[str, Any]], top_n: int,
                     exported: int | None = None, objectives: Sequence[Objective] = (),
                     moot: Callable[[Mapping[str, Any]], frozenset[str]] = _no_moot) -> str:
    """HTML of the `top_n` trials by the study's first objective (`objectives`, the study's;
    none: by throughput), fitting plans first, with a column per objective other than
    throughput; the exported trial's row is marked (class "exported") and kept even when it is
    not in the top `top_n`. `moot`: the knob keys a row's plan does not run
    (`knobs.moot_keys`), whose cells are left empty; no column for a knob no row runs.

    `results`: rows of the results table (plain mappings: column -> value)."""
    columns = set().union(*(r.keys() for r in results)) if results else set()
    head_rows = _head_rows(results, top_n, exported, objectives[0] if objectives else None)
    row_moot = [{k.column for k in KNOBS if k.key in moot(row)} for row in head_rows]
    unrun = set.intersection(*row_moot) if row_moot else set()
    cols = [(c, h) for c, h in COLUMNS if c in columns and c not in unrun]
    shown = _objective_columns(objectives, head_rows)
    # The objectives' columns right after the trial's number: the order the rows are in.
    heads = ["#", cols[0][1], *(h for h, _ in shown), *(h for _, h in cols[1:])] if cols else ["#"]
    head = "".join(f'<th title="click to sort">{html.escape(h)}</th>' for h in heads)
    rows = []
    for rank, row in enumerate(head_rows, start=1):
        cells = [f'<td data-v="{rank}">{rank}</td>']
        for c, _ in cols:
            key, text = ("", "") if c in row_moot[rank - 1] else _cell(c, row.get(c))
            cells.append(f'<td data-v="{html.escape(key)}">{html.escape(text)}</td>')
        cells[2:2] = [cells_of[rank - 1] for _, cells_of in shown] if cols else []
        mark = (exported is not None and not _missing(row.get("trial_number"))
                and int(row["trial_number"]) == exported)
        rows.append(('<tr class="exported" data-exported="1" title="the exported trial">'
                     if mark else "<tr>") + "".join(cells) + "</tr>")
    return (
        '<table class="sortable" data-table="top_trials">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
