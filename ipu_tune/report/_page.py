"""A report page being built: its sections in order, figures as plotly's `to_html` writes them.

plotly.js goes inline with the first figure only; the page is a list of text segments with None
where plotly.js goes, so the 4.8 MB bundle is written as its file's bytes, never decoded.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from ._figures import Figure
from ._table import SORT_JS

__all__ = ["PLOTLY_JS", "Page"]

# What plotly's `to_html` escapes in the JSON it puts inside <script> (plotly.io._json).
_JSON_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "/": "\\u002f",
                            "\u2028": "\\u2028", "\u2029": "\\u2029"})
_PLOT_CONFIG = json.dumps({"displaylogo": False, "responsive": True})

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
# file, never decoded, copied into the page's text and encoded again (~0.1 s).
PLOTLY_JS = None


class Page:
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
            PLOTLY_JS, "</script>") if self.figures == 0 else ()
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


