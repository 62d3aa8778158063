"""The PopRun command line of a multi-instance or multi-host plan.

Flags as the PopRun user guide lists them ("PopRun features"):
`--num-instances`, `--num-replicas` (total over all instances), `--ipus-per-replica`, and
`--host` with the servers listed. PopRun has no host-count flag, so the servers appear as the
placeholders `host0,host1,...` for the user to replace. PopRun launches any program, whatever its
pipeline schedule: the line launches the PopTorch program when PopTorch runs the plan, else the
user's TensorFlow program (TensorFlow runs every schedule; `_schedules`).
"""

from __future__ import annotations

import shlex
from typing import Any

from ._context import EveryPlan, ExportContext
from ._docs import cite
from ._schedules import POPTORCH

__all__ = ["PopRunExporter", "poprun_command", "poprun_lines", "poprun_provenance"]

PROGRAM = "python poptorch_options.py"  # what the PopRun line launches by default
TF_PROGRAM = "python your_keras_program.py"  # ... when PopTorch cannot run the plan's schedule


def launched(ctx: ExportContext) -> str:
    """The program the PopRun line of this plan launches."""
    return PROGRAM if POPTORCH.runs(ctx.plan) else TF_PROGRAM


class PopRunExporter(EveryPlan):
    """The PopRun line of a multi-instance or multi-host plan; no file of its own: best.yaml,
    the programs' headers and the run's summary carry it."""

    name = "poprun"
    file_name = None
    label = "PopRun"

    def render(self, ctx: ExportContext) -> str:
        command = poprun_command(ctx)
        return "" if command is None else command + "\n"


def _hosts(ctx: ExportContext) -> list[str]:
    return [f"host{i}" for i in range(ctx.hosts_used)]


def poprun_command(ctx: ExportContext, program: str | None = None) -> str | None:
    """`poprun ... <program>` for the plan (None: `launched(ctx)`); None for one instance on one
    host."""
    if ctx.host_instances <= 1 and ctx.hosts_used <= 1:
        return None
    program = launched(ctx) if program is None else program
    args = [
        "poprun",
        *("--num-instances", str(ctx.host_instances)),
        *("--num-replicas", str(ctx.replicas)),
        *("--ipus-per-replica", str(ctx.stages)),
    ]
    if ctx.hosts_used > 1:
        args += ["--host", ",".join(_hosts(ctx))]
    return " ".join(shlex.quote(a) for a in args) + " " + program


def poprun_provenance(ctx: ExportContext, program: str | None = None) -> dict[str, Any]:
    """Keys for best.yaml's `ipu_tune:` block: the PopRun line and what its placeholders mean."""
    command = poprun_command(ctx, program)
    if command is None:
        return {}
    out: dict[str, Any] = {"poprun": command}
    if ctx.hosts_used > 1:
        out["poprun_hosts"] = (
            f"{', '.join(_hosts(ctx))} are placeholders: list your {ctx.hosts_used} servers"
            " (PopRun has no host-count flag)"
        )
    return out


def poprun_lines(ctx: ExportContext, program: str) -> list[str]:
    """Comment lines showing how to launch `program`: under poprun, or directly."""
    command = poprun_command(ctx, program)
    if command is None:
        return ["# Run it on an IPU system (Poplar SDK enabled):", f"#     {program}"]
    flags = command[: -len(program)].rstrip()
    out = [
        f"# Run it under PopRun ({cite('poprun')}), from the first host:",
        f"#     {flags} \\",
        f"#         {program}",
    ]
    if ctx.hosts_used > 1:
        out.append(
            f"# {', '.join(_hosts(ctx))} are placeholders: list your {ctx.hosts_used} servers"
            " (PopRun has no host-count flag; --hostfile takes a file of them instead)."
        )
    return out
