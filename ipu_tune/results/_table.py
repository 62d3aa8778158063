"""The report's table of top trials: plain HTML, sortable by clicking a header (inline JS)."""

from __future__ import annotations

import html
import json
import math
from typing import Any

import pandas as pd

from ipu_tune.knobs import KNOBS

__all__ = ["SORT_JS", "top_trials_table"]

# (column of the results table, header). Missing columns are skipped, so older tables still work.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("trial_number", "trial"),
    ("throughput", "samples/s"),
    ("fits", "fits"),
    ("peak_memory_bytes", "peak MiB/IPU"),
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
        return str(int(value)), f"{int(value) / (1 << 20):.0f}"
    if column == "throughput":
        return repr(float(value)), f"{float(value):,.1f}"
    if column in _BOOL_COLUMNS:
        flag = str(value).lower() in ("true", "1")
        return str(int(flag)), "yes" if flag else "no"
    return str(value), str(value)


def top_trials_table(results: pd.DataFrame, top_n: int, exported: int | None = None) -> str:
    """HTML of the `top_n` trials by throughput, fitting plans first; the exported trial's row
    is marked (class "exported") and kept even when it is not in the top `top_n`."""
    cols = [(c, h) for c, h in COLUMNS if c in results.columns]
    df = results
    if "state" in df.columns:
        df = df[df["state"].isin(("COMPLETE", "PRUNED"))]  # PRUNED: infeasible, no value
    if "throughput" in df.columns:
        fits = df["fits"].astype(bool) if "fits" in df.columns else True
        df = df.assign(_fits=fits).sort_values(
            ["_fits", "throughput"], ascending=[False, False], kind="stable"
        )
    head_df = df.head(top_n)
    if exported is not None and "trial_number" in df.columns:
        mine = df[df["trial_number"] == exported]
        if not mine.empty and exported not in set(head_df["trial_number"]):
            head_df = pd.concat([mine, head_df.head(top_n - 1)])
    df = head_df
    head = "".join(
        f'<th title="click to sort">{html.escape(h)}</th>' for _, h in [("", "#"), *cols]
    )
    rows = []
    for rank, (_, row) in enumerate(df.iterrows(), start=1):
        cells = [f'<td data-v="{rank}">{rank}</td>']
        for c, _ in cols:
            key, text = _cell(c, row[c])
            cells.append(f'<td data-v="{html.escape(key)}">{html.escape(text)}</td>')
        mark = ("trial_number" in row and exported is not None
                and int(row["trial_number"]) == exported)
        rows.append(('<tr class="exported" data-exported="1" title="the exported trial">'
                     if mark else "<tr>") + "".join(cells) + "</tr>")
    return (
        '<table class="sortable" data-table="top_trials">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
