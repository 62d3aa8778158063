"""Where the best plan's step goes: each phase's seconds and share, and the gradient
collectives split into their terms, each with its source (`ipu_tune.simulator.ALL_REDUCE_TERMS`:
a datasheet or poplibs figure, or "estimate")."""

from __future__ import annotations

from typing import Any

from ipu_tune.simulator import ALL_REDUCE_TERMS, TIME_PHASES, SimResult

__all__ = ["phase_shares"]


def phase_shares(result: SimResult) -> list[dict[str, Any]]:
    """One row per phase with time (seconds, share of the step), then one per all-reduce term
    (`phase` = `all_reduce_terms.<name>`, its `source`); shares are of the whole step."""
    step = sum(result.phases.values())
    if step <= 0.0:
        return []
    rows: list[dict[str, Any]] = [
        {"phase": p, "seconds": result.phases[p], "share": result.phases[p] / step,
         "source": ""}
        for p in TIME_PHASES if result.phases.get(p, 0.0) > 0.0
    ]
    terms = result.extras.get("all_reduce_terms") or {}
    for name, seconds in terms.items():
        if seconds > 0.0:
            rows.append({"phase": f"all_reduce_terms.{name}", "seconds": float(seconds),
                         "share": float(seconds) / step,
                         "source": ALL_REDUCE_TERMS.get(name, "estimate")})
    return rows
