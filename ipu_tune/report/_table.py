"""The report's table of top trials: plain HTML, sortable by clicking a header (inline JS)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ipu_tune.knobs import KNOBS

__all__ = ["SORT_JS", "top_trials_table"]

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


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _rank(row: Mapping[str, Any]) -> tuple[bool, bool, float]:
    """Sort key: plans that fit first, then throughput high to low; plans without one (they do
    not fit) by peak memory, the closest to fitting first."""
    tp = row.get("throughput")
    fits = not _missing(row.get("fits")) and bool(row.get("fits"))
    if tp is None or _missing(tp):
        peak = row.get("peak_memory_bytes")
        return (not fits, True, float("inf") if peak is None or _missing(peak) else float(peak))
    return (not fits, False, -float(tp))


def top_trials_table(results: Sequence[Mapping[str, Any]], top_n: int,
                     exported: int | None = None) -> str:
    """HTML of the `top_n` trials by throughput, fitting plans first; the exported trial's row
    is marked (class "exported") and kept even when it is not in the top `top_n`.

    `results`: rows of the results table (plain mappings: column -> value)."""
    columns = set().union(*(r.keys() for r in results)) if results else set()
    cols = [(c, h) for c, h in COLUMNS if c in columns]
    # PRUNED: infeasible, no objective value (ranked after the plans that fit)
    rows_in = [r for r in results if "state" not in r or r["state"] in ("COMPLETE", "PRUNED")]
    if "throughput" in columns:
        rows_in = sorted(rows_in, key=_rank)  # stable: the table's order among equals
    head_rows = rows_in[:top_n]
    if exported is not None and "trial_number" in columns:
        mine = [r for r in rows_in if r.get("trial_number") == exported]
        if mine and all(r.get("trial_number") != exported for r in head_rows):
            head_rows = [*mine, *head_rows[: top_n - 1]]
    head = "".join(
        f'<th title="click to sort">{html.escape(h)}</th>' for _, h in [("", "#"), *cols]
    )
    rows = []
    for rank, row in enumerate(head_rows, start=1):
        cells = [f'<td data-v="{rank}">{rank}</td>']
        for c, _ in cols:
            key, text = _cell(c, row.get(c))
            cells.append(f'<td data-v="{html.escape(key)}">{html.escape(text)}</td>')
        mark = (exported is not None and not _missing(row.get("trial_number"))
                and int(row["trial_number"]) == exported)
        rows.append(('<tr class="exported" data-exported="1" title="the exported trial">'
                     if mark else "<tr>") + "".join(cells) + "</tr>")
    return (
        '<table class="sortable" data-table="top_trials">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
