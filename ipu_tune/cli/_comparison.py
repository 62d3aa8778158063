"""The table that ends a `-m` sweep: one row per run, its best objective and plan highlights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipu_tune.cli._common import aligned_lines
from ipu_tune.knobs import KNOBS, get_key, moot_keys, rate_number
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
    moot = moot_keys(c, s.model)  # as the plan line leaves out
    for k in KNOBS:
        value = get_key(c, k.key)
        if k.key in moot:
            continue
        if k.highlight == "always" or (k.highlight == "changed" and not k.at_default(value)):
            parts.append(f"{k.label} {k.text(value)}")
    return ", ".join(parts)


def _no_plan(s: RunSummary) -> str:
    """The headline's first clause: memory overflows, or the search's other constraints."""
    closest = s.explanation.closest if s.explanation is not None else None
    return closest.headline.split(":")[0] if closest is not None else "no plan fits"


def _infer(s: RunSummary) -> bool:
    return s.best_config is not None and s.best_config.workload.mode == "infer"


def _row(s: RunSummary, latency: bool) -> dict[str, Any]:
    r = s.best_result
    best = "; ".join(_objective(k, v) for k, v in s.objectives.items())
    # A plan that does not fit has no throughput (the simulator's 0.0 is not a rate) nor latency.
    fits = r is not None and r.fits
    row = {
        "study": s.study_name,
        "trials": s.n_complete,
        "best objective": best or ("-" if r is None else _objective("throughput", r.throughput)),
        "samples/s": rate_number(r.throughput) if r is not None and fits else "-",
    }
    if latency:  # a sweep of inference runs: what a call waits (a training step has no caller)
        row[_LATENCY] = (f"{r.latency_s * 1e3:,.3f}" if r is not None and fits and _infer(s)
                         else "-")
    return row | {
        "peak MB/IPU": "-" if r is None else f"{max(r.memory_per_ipu, default=0) / MB:,.0f}",
        "fits": "-" if r is None else ("yes" if r.fits else "no"),
        "bottleneck": "-" if r is None else r.bottleneck,
        "plan": _plan_highlights(s) or _no_plan(s),
    }


_LATENCY = "latency ms/call"
# Columns of figures, right-aligned; the others read left to right.
_NUMERIC = ("trials", "samples/s", _LATENCY, "peak MB/IPU")


def format_comparison(summaries: Sequence[RunSummary]) -> str:
    """A plain-text table comparing the runs of a sweep, one row per run."""
    latency = any(_infer(s) for s in summaries)
    rows = [{k: str(v) for k, v in _row(s, latency).items()} for s in summaries]
    if not rows:
        return "sweep of 0 runs"
    body = aligned_lines(list(rows[0]), rows, _NUMERIC)
    return f"sweep of {len(rows)} runs:\n" + "\n".join(body)
