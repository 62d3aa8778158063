"""The table that ends a `-m` sweep: one row per run, its best objective and plan highlights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipu_tune.cli._common import aligned_lines
from ipu_tune.knobs import KNOBS, get_key, rate_number
from ipu_tune.search import show_value
from ipu_tune.tuner import RunSummary

__all__ = ["format_comparison"]

MB = 1e6


def _objective(name: str, value: float) -> str:
    return f"{name} {show_value(name, value)}"


def _plan_highlights(s: RunSummary) -> str:
    """The layout, then the knobs declared as highlights (`Knob.highlight`)."""
    c = s.best_config
    if c is None:
        return ""
    p = c.plan
    stages = len(p.pipeline.splits) + 1
    parts = [f"{stages} stage(s) x {p.replication_factor} replica(s)"]
    for k in KNOBS:
        value = get_key(c, k.key)
        if k.highlight == "always" or (k.highlight == "changed" and value != k.default):
            parts.append(f"{k.label} {k.text(value)}")
    return ", ".join(parts)


def _row(s: RunSummary) -> dict[str, Any]:
    r = s.best_result
    best = "; ".join(_objective(k, v) for k, v in s.objectives.items())
    return {
        "study": s.study_name,
        "trials": s.n_complete,
        "best objective": best or ("-" if r is None else _objective("throughput", r.throughput)),
        # A plan that does not fit has no throughput (the simulator's 0.0 is not a rate).
        "samples/s": "-" if r is None or not r.fits else rate_number(r.throughput),
        "peak MB/IPU": "-" if r is None else f"{max(r.memory_per_ipu, default=0) / MB:,.0f}",
        "fits": "-" if r is None else ("yes" if r.fits else "no"),
        "bottleneck": "-" if r is None else r.bottleneck,
        "plan": _plan_highlights(s) or "no plan fits",
    }


# Columns of figures, right-aligned; the others read left to right.
_NUMERIC = ("trials", "samples/s", "peak MB/IPU")


def format_comparison(summaries: Sequence[RunSummary]) -> str:
    """A plain-text table comparing the runs of a sweep, one row per run."""
    rows = [{k: str(v) for k, v in _row(s).items()} for s in summaries]
    if not rows:
        return "sweep of 0 runs"
    body = aligned_lines(list(rows[0]), rows, _NUMERIC)
    return f"sweep of {len(rows)} runs:\n" + "\n".join(body)
