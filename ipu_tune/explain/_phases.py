"""Where the best plan's step goes: each phase's seconds and share, each gradient collective
followed by the terms it is made of, each term with its source
(`ipu_tune.simulator.ALL_REDUCE_TERMS`: a datasheet or poplibs figure, or "estimate")."""

from __future__ import annotations

from typing import Any

from ipu_tune.simulator import ALL_REDUCE_TERM_PARTS, ALL_REDUCE_TERMS, TIME_PHASES, SimResult

__all__ = ["phase_shares"]


def phase_shares(result: SimResult) -> list[dict[str, Any]]:
    """One row per phase with time (seconds, `share` of the step; the shares add up to 1),
    each all-reduce phase followed by its terms: `term` (the printed name), `seconds`,
    `share_of_phase` and `source`. Terms are parts of their phase, so they have no `share` of
    the step: counting them too would count their seconds twice."""
    step = sum(result.phases.values())
    if step <= 0.0:
        return []
    terms = result.extras.get("all_reduce_terms") or {}
    rows: list[dict[str, Any]] = []
    for p in TIME_PHASES:
        seconds = result.phases.get(p, 0.0)
        if seconds <= 0.0:
            continue
        rows.append({"phase": p, "seconds": seconds, "share": seconds / step, "source": ""})
        for name, (phase, label) in ALL_REDUCE_TERM_PARTS.items():
            part = float(terms.get(name, 0.0))
            if phase == p and part > 0.0:
                rows.append({"phase": p, "term": label, "seconds": part,
                             "share_of_phase": part / seconds,
                             "source": ALL_REDUCE_TERMS[name]})
    return rows
