"""The end-of-run summary: the objective by name and unit, memory per IPU, plan, exports.

When no plan fits it leads with the closest plan, by how much and where it overflows, and the
remedies the simulator has checked. The exit status stays 0: a search that found no fitting
plan is a result, not a failure (README "Exit status").
"""

from __future__ import annotations

from typing import Any

from ipu_tune.knobs import KNOBS, get_key
from ipu_tune.results import poprun_command
from ipu_tune.search import OBJECTIVES
from ipu_tune.tuner import RunSummary

__all__ = ["format_summary"]

MB = 1e6
_LABELS = {
    "best": "best plan",
    "poptorch": "PopTorch program",
    "popart": "PopART options",
    "tensorflow": "TensorFlow 2 config",
    "report": "report",
}


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return str(list(value))
    return str(value)


def _speedup(explanation: dict[str, Any] | None) -> str:
    """`, x2.10 over your plan` (or why there is no such figure)."""
    steps = (explanation or {}).get("steps") or []
    if not steps:
        return ""
    first, last = steps[0], steps[-1]
    if not first["fits"]:
        return "; your plan does not fit"
    if first["throughput"] > 0:
        return f"; x{last['throughput'] / first['throughput']:.2f} samples/s over your plan"
    return ""


def _objective_line(s: RunSummary) -> str:
    r = s.best_result
    assert r is not None
    names = list(s.objectives) or ["throughput"]
    values = list(s.objectives.values()) or [r.throughput]
    shown = ", ".join(f"{OBJECTIVES[n].title} {OBJECTIVES[n].show(v)}"
                      for n, v in zip(names, values, strict=False) if n in OBJECTIVES)
    extra = []
    if names[0] == "memory":
        extra.append(f"limit {r.memory_limit_bytes / MB:,.1f} MB")
    if "throughput" not in names:
        extra.append(f"throughput {r.throughput:,.0f} samples/s")
    if names[0] == "changes":
        shown = f"{len(s.changes)} change" + ("" if len(s.changes) == 1 else "s")
        if s.changes:
            shown += ": " + ", ".join(s.changes)
    tail = (", " + ", ".join(extra)) if extra else ""
    return (f"best: trial {s.best_trial}, {shown}{tail}, bottleneck {r.bottleneck}"
            f"{_speedup(s.explanation)}")


def _no_fit(s: RunSummary) -> list[str]:
    from ipu_tune.cli.explain_cmd import format_remedies

    closest = (s.explanation or {}).get("closest")
    lines = ["no plan fits: every trial overflows the IPU's memory"]
    if closest:
        lines += format_remedies(closest)
    return lines


def format_summary(s: RunSummary) -> str:
    lines = [
        f"study {s.study_name} ({s.storage}): {s.n_complete} finished trials"
        f" ({s.ran_here} run now" + (f", {len(s.retried)} retried" if s.retried else "") + ")",
    ]
    r, c = s.best_result, s.best_config
    if r is None or c is None:
        lines += _no_fit(s)
    else:
        if len(s.objective_names) > 1:
            rule = (s.explanation or {}).get("rule")
            lines.append("objectives: " + " and ".join(OBJECTIVES[n].metric
                                                       for n in s.objective_names)
                         + (f"; exported {rule}" if rule else ""))
        lines.append(_objective_line(s))
        mem = ", ".join(
            f"IPU{i} {b / MB:,.0f}/{r.memory_limit_bytes / MB:,.0f} MB "
            f"({100 * b / r.memory_limit_bytes:.0f}%)"
            for i, b in enumerate(r.memory_per_ipu)
        )
        replicas = c.plan.replication_factor
        per = f" (each of {replicas} replicas)" if replicas > 1 else ""
        lines.append(f"memory per IPU{per}: {mem}")
        lines.append("plan: " + ", ".join(
            f"{k.label} {_show(get_key(c, k.key))}" for k in KNOBS if k.label))
        command = poprun_command(c, "python poptorch_options.py")
        if command is not None:
            lines.append(f"PopRun (host names are placeholders for your servers): {command}")
    if s.convergence is not None and s.convergence.last_improved is not None:
        lines.append(s.convergence.describe())
    for key, path in s.exports.items():
        lines.append(f"{_LABELS.get(key, key)}: {path}")
    return "\n".join(lines)
