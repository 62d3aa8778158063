"""`ipu-tune explain STUDY [--json]`: the optimisation ladder from your plan to the study's best.

Heavy modules (Optuna, the search) are imported inside `main`, so listing commands stay light.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ipu_tune.cli._common import ArgumentParser, aligned_lines, fail, print_out
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import rate_number, rate_text

if TYPE_CHECKING:  # Optuna and the search load only when the command runs
    from ipu_tune.explain import Closest, Explanation

__all__ = ["NO_CLOSEST", "NO_TRIAL_FINISHED", "format_explain", "format_ladder", "format_phases",
           "format_remedies", "main"]

MB = 1e6


def _objective_title(row: Mapping[str, Any]) -> str:
    """The column of the study's objective beside samples/s ("" for a throughput study)."""
    from ipu_tune.explain import objective_title  # loaded with the explanation it renders

    return objective_title(row)


def format_ladder(data: Explanation) -> list[str]:
    """The ladder table: step, change, fits, peak memory per IPU vs limit, samples/s, speed-up."""
    from ipu_tune.explain import INVALID_PLAN, invalid_start

    steps = data.steps
    if not steps:
        return []
    width = min(60, max(len("change"), *(len(s["change"]) for s in steps)))
    title = _objective_title(steps[0])
    figures = ["peak MB/IPU (limit)", "samples/s", "speed-up", *([title] if title else [])]
    rows = []
    for s in steps:
        invalid = s["bottleneck"] == INVALID_PLAN
        row = {"step": str(s["step"]),
               "change": s["change"] if len(s["change"]) <= width else s["change"][:width - 3]
               + "...",
               "fits": "yes" if s["fits"] else ("n/a" if invalid else "NO"),
               "peak MB/IPU (limit)": "-" if invalid else
               f"{s['peak_memory_bytes'] / MB:,.0f} ({s['memory_limit_bytes'] / MB:,.0f})",
               "samples/s": rate_number(s["throughput"]) if s["fits"] else "-",
               "speed-up": f"x{s['speedup']:.2f}" if s["speedup"] is not None else "-",
               "bottleneck": s["bottleneck"]}
        if title:
            row[title] = s["objective_shown"] if s["fits"] else "-"
        rows.append(row)
    head, *body = aligned_lines(["step", "change", "fits", *figures, "bottleneck"], rows,
                                ["step", *figures])
    lines = [f"steps ranked by: {data.ladder_rank}"] if data.ladder_rank else []
    lines += [head, "-" * len(head), *body]
    lines.append("speed-up: samples/s over the first step that fits; peak MB on the fullest IPU.")
    note = invalid_start(data)
    if note:
        lines.append(note)
    return lines


# A study with no finished trial (the run summary says the same, with what stopped the run).
NO_TRIAL_FINISHED = "no plan yet: no trial finished"
# Trials finished, none fits, and none is nearer than another (no stored constraint values).
NO_CLOSEST = "no plan fits: no finished trial meets the search's constraints"

# When nothing on this system fits: what is left to change (docs/first-run.md names a system
# each zoo model fits on).
_BEYOND = ("it needs more IPUs or more memory per IPU than this system has (e.g. system=pod16 "
           "or pod64; docs/first-run.md names a system for each zoo model), or a smaller model "
           "or input (e.g. a shorter sequence)")
# When not even a stage per block on more IPUs of this kind fits.
_NO_SYSTEM = ("not even with more IPUs of this kind, a pipeline stage per block (the last "
              "remedy): a stage does not fit one IPU; what is left is a smaller model or input "
              "(e.g. a shorter sequence, a smaller vocabulary), or one layer split over several "
              "IPUs (tensor parallelism, an embedding table split over IPUs), which ipu-tune does "
              "not model")


def format_remedies(closest: Closest, argv: Sequence[str] | None = None) -> list[str]:
    """What the no-fit summary says: the closest plan, its excess, the remedies checked, each
    with the command that runs it (`argv`: the user's command-line arguments)."""
    from ipu_tune.explain import remedy_command  # loaded with the explanation it renders

    lines = [f"closest plan: {closest.describe()}"]
    if not closest.overflows:  # another constraint than memory: no memory remedy helps
        return lines
    checked = list(closest.remedies)
    fitting = [r for r in checked if r["fits"]]
    if checked:
        lines.append("remedies, each simulated (what fits with the fewest changes first):")
        for r in fitting or checked:  # when some fit, the others are only named
            verdict = (f"fits, {rate_text(r['throughput'])}, peak {r['memory']}"
                       if r["fits"] else f"still does not fit (peak {r['memory']})")
            lines.append(f"  - {r['remedy']}: {verdict}")
            lines.append(f"      {remedy_command(r['overrides'], argv)}")
        others = [r["remedy"] for r in checked if not r["fits"]] if fitting else []
        if others:
            lines.append("  also checked, does not fit alone: " + "; ".join(others))
        if not fitting:
            larger = any(r.get("larger_system") for r in checked)
            lines.append("none of these fits: " + (_NO_SYSTEM if larger else _BEYOND))
    else:
        lines.append("remedies: none; no smaller micro-batch, lower precision, stronger "
                     "recomputation, offloading, lower available memory proportion or further "
                     f"pipeline stage lowers this plan's peak: {_BEYOND}")
    return lines


def format_sensitivity(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    title = _objective_title(rows[0])
    figures = ["value", "samples/s", "change", *(["objective", "its change"] if title else [])]
    cells = []
    for r in rows:
        pct = r.get("objective_change_pct")
        cells.append({
            "knob": r["knob"], "value": str(r["value"]),
            "fits": "yes" if r["fits"] else ("NO" if r["valid"] else "n/a"),
            "samples/s": rate_number(r["throughput"]) if r["fits"] else "-",
            "change": f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "-",
            "objective": str(r.get("objective_shown", "-")),
            "its change": f"{pct:+.1f}%" if pct is not None else "-",
            "in search space": "yes" if r["searched"] else "no"})
    columns = ["knob", "value", "fits", *figures[1:], "in search space"]
    headers = [title if c == "objective" else "change" if c == "its change" else c
               for c in columns]
    return ["", "sensitivity of the best plan (one knob one step down / up, simulated):",
            *("  " + line for line in aligned_lines(columns, cells, figures, headers)),
            "in search space: no = the study could not draw it: pinned by you, moot in this "
            "mode, derived (GA of a fixed global batch), or outside the range fitted to your "
            "plan (the micro-batch above yours; widen the space file for others)"]


def format_phases(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The best plan's step by phase (shares of the step, adding up to 100%), each collective's
    terms indented under it with their share of that phase and their sources."""
    if not rows:
        return []
    lines = ["", "where the best plan's step goes (simulated; indented: parts of the phase above):"]
    for r in rows:
        ms = f"{r['seconds'] * 1e3:>10.3f} ms"
        if "term" in r:
            lines.append(f"    {r['term']:<30} {ms} {100 * r['share_of_phase']:>6.1f}% of phase"
                         f"  [{r['source']}]")
        else:
            lines.append(f"  {r['phase']:<32} {ms} {100 * r['share']:>6.1f}%")
    return lines


def format_explain(data: Explanation) -> str:
    # Each objective in the unit its figures below are shown in (the stored metric's may differ:
    # a latency is stored in s, shown in ms).
    axes = [r["axis"] for r in data.objectives] or [data.metric]
    lines = [f"study {data.study}: objective{'s' if len(axes) > 1 else ''} {', '.join(axes)}"]
    if data.best_trial is None and not data.finished:  # nothing simulated: no verdict on fit
        lines.append(NO_TRIAL_FINISHED + "; nothing to explain until one has")
        return "\n".join(lines)
    if data.best_trial is None:
        lines.append((data.closest.headline if data.closest else NO_CLOSEST)
                     + "; nothing to climb to")
        if data.closest is not None:
            lines += format_remedies(data.closest)
        return "\n".join(lines)
    lines.append(f"from {data.start} (step 0) to the exported best, trial {data.best_trial},"
                 " one change at a time:")
    lines += format_ladder(data)
    lines += format_phases(data.phases)
    lines += format_sensitivity(data.sensitivity)
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    from ipu_tune.cli.studies_cmd import storage_args, stored_problem

    parser = ArgumentParser(
        prog="ipu-tune explain",
        description="The optimisation ladder of a stored study: from your plan to its best, "
                    "one knob at a time, each step simulated.",
    )
    parser.add_argument("study")
    parser.add_argument("--json", action="store_true", help="print the steps as JSON")
    parser.add_argument("--no-sensitivity", action="store_true",
                        help="skip the one-step-per-knob sensitivity of the best plan")
    storage_args(parser)
    args = parser.parse_args(list(argv))
    try:
        from ipu_tune.explain import explain_study

        with stored_problem(args) as (study, _, _, problem):
            data = explain_study(study, problem, with_sensitivity=not args.no_sensitivity)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    return print_out(json.dumps(data.to_json(), indent=2) if args.json else format_explain(data))
