"""The PopRun command line of a multi-instance or multi-host plan.

Flags as the PopRun user guide lists them ("PopRun features", framework-apis.md 4.1):
`--num-instances`, `--num-replicas` (total over all instances), `--ipus-per-replica`, and
`--host` with the servers listed. PopRun has no host-count flag, so the servers appear as the
placeholders `host0,host1,...` for the user to replace.
"""

from __future__ import annotations

import shlex
from typing import Any

from ipu_tune.config import EvalConfig

from ._docs import cite
from ._plan_view import ExportPlan, export_plan

__all__ = ["poprun_command", "poprun_lines", "poprun_provenance"]


def _hosts(xp: ExportPlan) -> list[str]:
    return [f"host{i}" for i in range(xp.hosts_used)]


def poprun_command(cfg: EvalConfig, program: str = "python train.py") -> str | None:
    """`poprun ... <program>` for the plan of `cfg`; None for one instance on one host."""
    xp = export_plan(cfg)
    if xp.host_instances <= 1 and xp.hosts_used <= 1:
        return None
    args = [
        "poprun",
        *("--num-instances", str(xp.host_instances)),
        *("--num-replicas", str(xp.replicas)),
        *("--ipus-per-replica", str(xp.stages)),
    ]
    if xp.hosts_used > 1:
        args += ["--host", ",".join(_hosts(xp))]
    return " ".join(shlex.quote(a) for a in args) + " " + program


def poprun_provenance(
    cfg: EvalConfig, program: str = "python poptorch_options.py"
) -> dict[str, Any]:
    """Keys for best.yaml's `ipu_tune:` block: the PopRun line and what its placeholders mean."""
    command = poprun_command(cfg, program)
    if command is None:
        return {}
    xp = export_plan(cfg)
    out: dict[str, Any] = {"poprun": command}
    if xp.hosts_used > 1:
        out["poprun_hosts"] = (
            f"{', '.join(_hosts(xp))} are placeholders: list your {xp.hosts_used} servers"
            " (PopRun has no host-count flag)"
        )
    return out


def poprun_lines(cfg: EvalConfig, program: str) -> list[str]:
    """Comment lines showing how to launch `program`: under poprun, or directly."""
    command = poprun_command(cfg, program)
    if command is None:
        return ["# Run it on an IPU system (Poplar SDK enabled):", f"#     {program}"]
    flags = command[: -len(program)].rstrip()
    xp = export_plan(cfg)
    out = [
        f"# Run it under PopRun ({cite('poprun')}), from the first host:",
        f"#     {flags} \\",
        f"#         {program}",
    ]
    if xp.hosts_used > 1:
        out.append(
            f"# {', '.join(_hosts(xp))} are placeholders: list your {xp.hosts_used} servers"
            " (PopRun has no host-count flag; --hostfile takes a file of them instead)."
        )
    return out
