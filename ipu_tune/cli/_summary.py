"""The end-of-run summary: best throughput, memory per IPU against the limit, plan, exports."""

from __future__ import annotations

from ipu_tune.knobs import KNOBS, get_key
from ipu_tune.results import poprun_command
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


def format_summary(s: RunSummary) -> str:
    lines = [
        f"study {s.study_name} ({s.storage}): {s.n_complete} finished trials"
        f" ({s.ran_here} run now" + (f", {len(s.retried)} retried" if s.retried else "") + ")",
    ]
    r, c = s.best_result, s.best_config
    if r is None or c is None:
        lines.append("no plan fits: see the report for the memory excess of each trial")
    else:
        lines.append(
            f"best: trial {s.best_trial}, {r.throughput:,.0f} samples/s, bottleneck "
            f"{r.bottleneck}"
        )
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
