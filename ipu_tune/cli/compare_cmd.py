"""`ipu-tune compare A.yaml B.yaml [--json]`: two plans side by side, the differences marked.

Plan knobs and every other key of the configs that differs, memory by category on the fullest
IPU, time per step by phase, throughput: each row shows A, B and a `*` where they differ (for
figures, B's change against A in %).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ipu_tune.cli._common import ArgumentParser, fail, path_arg, print_out
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import rate_number, shown

__all__ = ["main"]

MB = 1e6


def _pct(a: float, b: float, a_text: str, b_text: str) -> str:
    """The mark of a figure's row: judged on the values as printed (`a_text`, `b_text`), so no
    row claims a difference it does not show (0.04 MB against 0.01 MB both print 0.0); a
    change that rounds to 0% keeps two significant digits (+0.021%)."""
    if a_text == b_text:
        return ""
    if not a:
        return "*"
    pct = 100 * (b / a - 1)
    text = f"{pct:+.0f}"
    return f"* {text if text not in ('+0', '-0') else f'{pct:+.2g}'}%"


_FIRST = ("model.name", "system.ipu", "system.num_ipus")  # rows always shown, above the knobs
_ABSENT = "-"  # a key of a free mapping (`model.kwargs`, `model.hf.config`) one side lacks


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every value of a plain config by its dotted key; lists and empty mappings are values."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, sub in value.items():
        out.update(_leaves(sub, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _other_differences(cfgs: list[Any], listed: set[str]) -> list[dict[str, Any]]:
    """Rows of the keys outside the knobs that differ (the dataset's cost, the host, the
    model's input): each is a cause the simulated figures below may show, so none is hidden.
    `system.hosts` is compared as the servers it means (null: one per 16 IPUs), as a study
    resumes it."""
    from ipu_tune.config import hosts_as_servers, to_plain_dict

    a, b = (hosts_as_servers(_leaves(to_plain_dict(c))) for c in cfgs)
    rows = []
    for key in [*a, *(k for k in b if k not in a)]:
        va, vb = a.get(key, _ABSENT), b.get(key, _ABSENT)
        if key not in listed and va != vb:
            rows.append({"name": key, "a": va, "b": vb, "differs": True})
    return rows


_NOT_RUN = "not run"  # a knob's value in a plan that does not run it


def compare(a_path: str, b_path: str, constants: str | None = None) -> dict[str, Any]:
    """Both plans simulated (with a `calibrate --output` file's `constants`): rows of (name,
    A, B, differs) per section."""
    from ipu_tune.case import build_case, read_constants, simulate_case
    from ipu_tune.config import load_config
    from ipu_tune.knobs import KNOBS, get_key, moot_keys
    from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES

    cfgs = [load_config(a_path), load_config(b_path)]
    cases, fitted = [build_case(c) for c in cfgs], read_constants(constants, "--constants")
    res = [simulate_case(case, fitted) for case in cases]
    # A knob a plan does not run (`knobs.moot_keys`) reads "not run"; no row when neither does.
    moot = [moot_keys(c, case.profile.facts) for c, case in zip(cfgs, cases, strict=True)]
    plan = []
    for k in KNOBS:
        if all(k.key in m for m in moot):
            continue
        va, vb = (_NOT_RUN if k.key in m else get_key(c, k.key)
                  for c, m in zip(cfgs, moot, strict=True))
        va, vb = (list(v) if isinstance(v, tuple) else v for v in (va, vb))
        plan.append({"name": k.label or k.key, "a": va, "b": vb, "differs": va != vb})
    for key in _FIRST:
        va, vb = (get_key(c, key) for c in cfgs)
        plan.insert(0, {"name": key, "a": va, "b": vb, "differs": va != vb})
    plan += _other_differences(cfgs, {k.key for k in KNOBS} | set(_FIRST))

    fa, fb = (max(r.memory, key=lambda m: m.total_bytes) if r.memory else None for r in res)
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
    # Steps of plans that move different numbers of samples compare per sample too.
    spp = [r.samples_per_step for r in res]
    per_sample = [r.step_time_s / n if n else 0.0 for r, n in zip(res, spp, strict=True)]
    time.append({"name": "step / samples per step", "a": per_sample[0], "b": per_sample[1],
                 "differs": per_sample[0] != per_sample[1]})
    verdict = [
        {"name": "samples per step", "a": spp[0], "b": spp[1], "differs": spp[0] != spp[1]},
        {"name": "fits", "a": res[0].fits, "b": res[1].fits, "differs": res[0].fits != res[1].fits},
        {"name": "throughput", "a": res[0].throughput, "b": res[1].throughput,
         "differs": res[0].throughput != res[1].throughput},
        {"name": "bottleneck", "a": res[0].bottleneck, "b": res[1].bottleneck,
         "differs": res[0].bottleneck != res[1].bottleneck},
    ]
    if "infer" in (c.workload.mode for c in cfgs):
        # A call's latency (inputs on the host to results on the host) is what inference is
        # served by; a training step has no caller waiting on it.
        verdict.insert(3, {"name": "latency_s", "a": res[0].latency_s, "b": res[1].latency_s,
                           "differs": res[0].latency_s != res[1].latency_s})
    return {"a": a_path, "b": b_path, "plan": plan, "memory_bytes_fullest_ipu": memory,
            "time_s_per_step": time, "result": verdict,
            "reasons": [res[0].reason, res[1].reason]}


_W, _V = 24, 18  # widths of the name column and of each value column


def _row(name: str, a: str, b: str, mark: str) -> list[str]:
    """One row; values too wide for their column (a long splits list) or a name too wide for
    its own (`model.dataset.preprocess_s_per_sample`) go on lines of their own, so A's and B's
    never run together."""
    if max(len(a), len(b)) < _V - 1 and len(name) < _W:
        return [f"{name:<{_W}}{a:>{_V}}{b:>{_V}}{mark}"]
    return [f"{name}{mark}", f"  A: {a}", f"  B: {b}"]


def _figure(value: float, fmt: str) -> str:
    """A figure in `fmt`; one below 1 in three significant digits instead (0.000342 ms, not
    0.000), so that the change its row shows is the change of the printed values."""
    return format(value, fmt) if value == 0 or abs(value) >= 1 else f"{value:.3g}"


def _figures(title: str, rows: list[dict[str, Any]], scale: float, fmt: str) -> list[str]:
    lines = ["", f"{title:<{_W}}{'A':>{_V}}{'B':>{_V}}"]
    for r in rows:
        if r["a"] or r["b"]:
            a, b = _figure(r["a"] * scale, fmt), _figure(r["b"] * scale, fmt)
            lines += _row(r["name"], a, b, f"  {_pct(r['a'], r['b'], a, b)}".rstrip())
    return lines


# Result rows of figures: (name printed, its unit's scale, format); a plan that does not fit
# has neither throughput nor latency ("-").
_RESULT_FIGURES: dict[str, tuple[str, float, str]] = {
    "throughput": ("samples/s", 1.0, ""),
    "latency_s": ("latency per call (ms)", 1e3, ",.3f"),
}


def _result_cell(name: str, value: Any, fits: bool) -> str:
    if name == "fits":
        return "yes" if value else "NO"
    if name in _RESULT_FIGURES:
        if not fits:
            return "-"
        _, scale, fmt = _RESULT_FIGURES[name]
        return format(value * scale, fmt) if fmt else rate_number(value)
    return f"{value:,.0f}" if isinstance(value, float) else str(value)


def format_compare(d: dict[str, Any]) -> str:
    lines = [f"A: {d['a']}", f"B: {d['b']}", "(* marks a difference; % is B against A)", ""]
    lines.append(f"{'plan':<{_W}}{'A':>{_V}}{'B':>{_V}}")
    for r in d["plan"]:
        a, b = ("null" if v is None else shown(v) for v in (r["a"], r["b"]))  # as YAML says
        lines += _row(r["name"], a, b, "  *" if a != b else "")  # as printed, as `_pct`
    lines += _figures("memory, fullest IPU (MB)", d["memory_bytes_fullest_ipu"], 1 / MB, ",.1f")
    lines += _figures("time per step (ms)", d["time_s_per_step"], 1e3, ",.3f")
    lines += ["", f"{'result':<{_W}}{'A':>{_V}}{'B':>{_V}}"]
    fits = {r["name"]: (r["a"], r["b"]) for r in d["result"]}["fits"]
    for r in d["result"]:
        a, b = (_result_cell(r["name"], v, f) for v, f in zip((r["a"], r["b"]), fits,
                                                                 strict=True))
        name = _RESULT_FIGURES.get(r["name"], (r["name"],))[0]
        mark = (f"  {_pct(r['a'], r['b'], a, b)}".rstrip()
                if r["name"] in _RESULT_FIGURES and all(fits)
                else "  *" if a != b else "")  # as printed, as `_pct`
        lines += _row(name, a, b, mark)
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
    parser.add_argument("a", metavar="A.yaml", type=path_arg)
    parser.add_argument("b", metavar="B.yaml", type=path_arg)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--constants", metavar="FILE", type=path_arg,
                        help="simulator constants YAML written by `ipu-tune calibrate --output` "
                             "(a study's own `simulator.constants`)")
    args = parser.parse_args(list(argv))
    try:
        data = compare(args.a, args.b, args.constants)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    return print_out(json.dumps(data, indent=2) if args.json else format_compare(data))
