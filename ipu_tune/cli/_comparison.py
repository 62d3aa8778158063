"""The table that ends a `-m` sweep: one row per run, its best objective and plan highlights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipu_tune.tuner import RunSummary

__all__ = ["format_comparison"]

MB = 1e6
# Objective -> (unit, scale) as `ipu_tune.search` defines them (search/_objectives.py).
_UNITS = {
    "throughput": ("samples/s", 1.0),
    "memory": ("MB", 1 / MB),
    "memory_headroom": ("of the fullest IPU free", 1.0),
    "latency": ("ms", 1e3),
    "changes": ("changes (+ throughput tie-break)", 1.0),
}


def _objective(name: str, value: float) -> str:
    unit, scale = _UNITS.get(name, ("", 1.0))
    return f"{name} {value * scale:,.6g} {unit}".rstrip()


def _plan_highlights(s: RunSummary) -> str:
    c = s.best_config
    if c is None:
        return ""
    p = c.plan
    stages = len(p.pipeline.splits) + 1
    parts = [
        f"{p.precision}",
        f"{stages} stage(s) x {p.replication_factor} replica(s)",
        f"mb {c.workload.micro_batch_size}",
        f"GA {p.gradient_accumulation}",
        f"DI {p.device_iterations}",
        f"recompute {p.recompute}",
    ]
    if p.host_instances > 1:
        parts.append(f"{p.host_instances} instances")
    return ", ".join(parts)


def _row(s: RunSummary) -> dict[str, Any]:
    r = s.best_result
    best = "; ".join(_objective(k, v) for k, v in s.objectives.items())
    return {
        "study": s.study_name,
        "trials": s.n_complete,
        "best objective": best or ("-" if r is None else _objective("throughput", r.throughput)),
        "samples/s": "-" if r is None else f"{r.throughput:,.0f}",
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
    columns = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}

    def line(cells: dict[str, str]) -> str:
        return "  ".join(
            cells[c].rjust(width[c]) if c in _NUMERIC else cells[c].ljust(width[c]) for c in columns
        ).rstrip()

    body = [line({c: c for c in columns}), *(line(r) for r in rows)]
    return f"sweep of {len(rows)} runs:\n" + "\n".join(body)
