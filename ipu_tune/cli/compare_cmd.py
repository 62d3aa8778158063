"""`ipu-tune compare A.yaml B.yaml [--json]`: two plans side by side, the differences marked.

Plan knobs, memory by category on the fullest IPU, time per step by phase, throughput: each
row shows A, B and a `*` where they differ (for figures, B's change against A in %).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ipu_tune.cli._common import ArgumentParser, fail, print_out
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import shown

__all__ = ["main"]

MB = 1e6


def _pct(a: float, b: float) -> str:
    if a == b:
        return ""
    return f"* {100 * (b / a - 1):+.0f}%" if a else "*"


def compare(a_path: str, b_path: str) -> dict[str, Any]:
    """Both plans simulated: rows of (name, A, B, differs) per section."""
    from ipu_tune._api import evaluate_config
    from ipu_tune.config import load_config
    from ipu_tune.knobs import KNOBS, get_key
    from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES

    cfgs = [load_config(a_path), load_config(b_path)]
    res = [evaluate_config(c) for c in cfgs]
    plan = []
    for k in KNOBS:
        va, vb = (get_key(c, k.key) for c in cfgs)
        va, vb = (list(v) if isinstance(v, tuple) else v for v in (va, vb))
        plan.append({"name": k.label or k.key, "a": va, "b": vb, "differs": va != vb})
    for key in ("model.name", "system.ipu", "system.num_ipus"):
        va, vb = (get_key(c, key) for c in cfgs)
        plan.insert(0, {"name": key, "a": va, "b": vb, "differs": va != vb})

    def fullest(r: Any) -> Any:
        return max(r.memory, key=lambda m: m.total_bytes) if r.memory else None

    fa, fb = fullest(res[0]), fullest(res[1])
    memory = []
    for cat in (*MEMORY_CATEGORIES, "total"):
        va = (fa.total_bytes if cat == "total" else fa.categories.get(cat, 0)) if fa else 0
        vb = (fb.total_bytes if cat == "total" else fb.categories.get(cat, 0)) if fb else 0
        memory.append({"name": cat, "a": va, "b": vb, "differs": va != vb})
    time = [{"name": p, "a": res[0].phases.get(p, 0.0), "b": res[1].phases.get(p, 0.0),
             "differs": res[0].phases.get(p, 0.0) != res[1].phases.get(p, 0.0)}
            for p in (*TIME_PHASES, "step")]
    time[-1].update(a=res[0].step_time_s, b=res[1].step_time_s,
                    differs=res[0].step_time_s != res[1].step_time_s)
    verdict = [
        {"name": "fits", "a": res[0].fits, "b": res[1].fits, "differs": res[0].fits != res[1].fits},
        {"name": "throughput", "a": res[0].throughput, "b": res[1].throughput,
         "differs": res[0].throughput != res[1].throughput},
        {"name": "bottleneck", "a": res[0].bottleneck, "b": res[1].bottleneck,
         "differs": res[0].bottleneck != res[1].bottleneck},
    ]
    return {"a": a_path, "b": b_path, "plan": plan, "memory_bytes_fullest_ipu": memory,
            "time_s_per_step": time, "result": verdict,
            "reasons": [res[0].reason, res[1].reason]}


def format_compare(d: dict[str, Any]) -> str:
    w = 24
    lines = [f"A: {d['a']}", f"B: {d['b']}", "(* marks a difference; % is B against A)", ""]
    lines.append(f"{'plan':<{w}}{'A':>18}{'B':>18}")
    for r in d["plan"]:
        lines.append(f"{r['name']:<{w}}{shown(r['a']):>18}{shown(r['b']):>18}"
                     f"{'  *' if r['differs'] else ''}")
    lines += ["", f"{'memory, fullest IPU (MB)':<{w}}{'A':>18}{'B':>18}"]
    for r in d["memory_bytes_fullest_ipu"]:
        if r["a"] or r["b"]:
            lines.append(f"{r['name']:<{w}}{r['a'] / MB:>18,.1f}{r['b'] / MB:>18,.1f}"
                         f"  {_pct(r['a'], r['b'])}".rstrip())
    lines += ["", f"{'time per step (ms)':<{w}}{'A':>18}{'B':>18}"]
    for r in d["time_s_per_step"]:
        if r["a"] or r["b"]:
            lines.append(f"{r['name']:<{w}}{r['a'] * 1e3:>18,.3f}{r['b'] * 1e3:>18,.3f}"
                         f"  {_pct(r['a'], r['b'])}".rstrip())
    lines += ["", f"{'result':<{w}}{'A':>18}{'B':>18}"]
    for r in d["result"]:
        if r["name"] == "throughput":
            lines.append(f"{'samples/s':<{w}}{r['a']:>18,.0f}{r['b']:>18,.0f}"
                         f"  {_pct(r['a'], r['b'])}".rstrip())
        else:
            a, b = (("yes" if v else "NO") if r["name"] == "fits" else str(v)
                    for v in (r["a"], r["b"]))
            lines.append(f"{r['name']:<{w}}{a:>18}{b:>18}{'  *' if r['differs'] else ''}")
    for label, reason in zip("AB", d["reasons"], strict=True):
        if reason:
            lines.append(f"{label} does not fit: {reason}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune compare",
        description="Simulate two plans (config YAMLs, e.g. best.yaml files) and show them side "
                    "by side: plan, memory by category, time by phase; differences marked.",
    )
    parser.add_argument("a", metavar="A.yaml")
    parser.add_argument("b", metavar="B.yaml")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(list(argv))
    try:
        data = compare(args.a, args.b)
    except IpuTuneError as exc:
        return fail(str(exc))
    return print_out(json.dumps(data, indent=2) if args.json else format_compare(data))
