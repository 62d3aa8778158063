"""The `trials` table: its columns named by the user, its filters, its cells as a terminal
shows them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from optuna.trial import TrialState

from ipu_tune.errors import IpuTuneError
from ipu_tune.records import TrialRecord

if TYPE_CHECKING:
    import optuna

    from ipu_tune.search import SearchProblem

__all__ = ["PARETO", "column_named", "filter_rows", "ranked", "readable_table", "trials_frame"]

# A finished trial: COMPLETE (a feasible plan, with values) or PRUNED (infeasible, no value).
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

_OPS = (">=", "<=", "!=", "=", ">", "<")


def column_named(df: Any, name: str, flag: str) -> str:
    """The column `name` means: its own, or the one it names without or by its unit
    (`throughput` or `samples/s` for `throughput (samples/s)`), if only one."""
    if name in df.columns:
        return name
    found = [c for c in df.columns if name in (c.split(" (")[0], c.rpartition(" (")[2][:-1])
             and c.endswith(")")]
    if len(found) == 1:
        return str(found[0])
    raise IpuTuneError(f"{flag}: no column {name!r}; columns: " + ", ".join(df.columns))


_TRUE, _FALSE = ("yes", "true"), ("no", "false")


def _spec(spec: str) -> tuple[str, str, str]:
    """COLUMN, op and VALUE of `COLUMN<op>VALUE`; a VALUE that starts with an operator's
    character (`precision==16.16`, `fits=>1`) is a typo, not a value to look for."""
    for op in _OPS:
        if op in spec:
            col, _, raw = spec.partition(op)
            if raw.strip()[:1] in ("=", "<", ">", "!"):
                raise IpuTuneError(
                    f"--where={spec!r}: the value {raw.strip()!r} starts with an operator's "
                    "character; allowed: COLUMN<op>VALUE with one of =, !=, >, <, >=, <= "
                    "(e.g. precision=16.16)")
            return col.strip(), op, raw.strip()
    raise IpuTuneError(f"--where={spec!r}: expected COLUMN=VALUE (or >, <, >=, <=, !=)")


def _is_yes_no(series: Any) -> bool:
    values = [v for v in series if v is not None and v == v]
    return bool(values) and all(isinstance(v, bool) for v in values)


def _yes_no(df: Any, series: Any, spec: str, col: str, op: str, raw: str) -> Any:
    """Rows of a yes/no column (`fits`, `feasible`, `Pareto front`) equal to `raw` or not."""
    if op not in ("=", "!=") or raw.lower() not in (*_TRUE, *_FALSE):
        raise IpuTuneError(f"--where={spec!r}: {col} is a yes/no column; allowed: {col}=yes, "
                           f"{col}=no (or true, false; != for the other)")
    mask = series.map(lambda v: v is True) == (raw.lower() in _TRUE)
    return df[mask if op == "=" else ~mask]


def filter_rows(df: Any, spec: str) -> Any:
    """Rows of `df` matching `COLUMN<op>VALUE` (op one of >=, <=, !=, =, >, <)."""
    col, op, raw = _spec(spec)
    col = column_named(df, col, f"--where={spec!r}")
    series = df[col]
    if _is_yes_no(series):
        return _yes_no(df, series, spec, col, op, raw)
    value: Any = raw
    if raw.lower() in ("nan", "+nan", "-nan"):  # NaN equals nothing, orders against nothing
        raise IpuTuneError(f"--where={spec!r}: {raw} is not a number to compare with; "
                           "allowed: a finite number, or a text value with = or !=")
    try:
        value = float(raw)
        series = series.astype(float)
    except (TypeError, ValueError):
        series = series.astype(str).str.lower()
        value = raw.lower()
    if isinstance(value, float) and not math.isfinite(value):  # inf, 1e999: compared with
        raise IpuTuneError(f"--where={spec!r}: {raw} is not a finite number; allowed: a "  # no row
                           "finite number, or a text value with = or !=")
    if op in ("=", "!="):
        mask = series == value
        return df[mask if op == "=" else ~mask]
    if isinstance(value, str):
        raise IpuTuneError(f"--where={spec!r}: {op} needs a number")
    return df[{">": series > value, "<": series < value, ">=": series >= value,
               "<=": series <= value}[op]]


_BOUNDED = 1e15  # from here a figure is printed in exponent form (`knobs.rate_number`)
_ALWAYS = 6  # trial, objective, fits, feasible, peak memory, bottleneck: always shown


def readable_table(df: Any) -> str:
    """A trials table a terminal shows whole: columns equal in every row are said once above
    it, empty cells are `-` (not None or NaN), booleans yes/no; no rows: a line saying so
    (not pandas' `Empty DataFrame` with every column name)."""
    if df.empty:
        return "no trials to show: none finished, or none matches --where / --fits"
    def cell(v: Any, number: str) -> str:
        if v is None or v == "" or (isinstance(v, float) and v != v):
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float) and not (math.isfinite(v) and abs(v) < _BOUNDED):
            return f"{v:.3g}"  # a stored 1e30 in 3 digits, not 31
        return format(v, number) if isinstance(v, float) else str(v)

    def number(column: Any) -> str:
        # One format per column: rates and MB (any value >= 100) to one decimal, small
        # figures (proportions, seconds) to 3 significant digits.
        floats = [abs(v) for v in column if isinstance(v, float) and v == v]
        return ",.1f" if floats and max(floats) >= 100 else ",.3g"

    def column(col: Any) -> Any:
        fmt = number(col)
        return col.map(lambda v: cell(v, fmt))

    shown = df.apply(column)
    same = [c for c in shown.columns[_ALWAYS:] if shown[c].nunique() == 1 and len(shown) > 1]
    head = ("same in every row: " + ", ".join(f"{c} {shown[c].iloc[0]}" for c in same) + "\n"
            if same else "")
    return head + shown.drop(columns=same).to_string(index=False)


def _knob_cells(config: Any) -> dict[str, Any]:
    """The plan knobs a trial ran with, by their column headers; `mode` too (dropped again
    by `trials_frame` when every trial ran in one mode)."""
    from ipu_tune.knobs import KNOBS

    row: dict[str, Any] = {}
    for k in KNOBS:
        if not k.header and k.key != "workload.mode":
            continue
        node: Any = config
        for part in k.key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        row[k.header or "mode"] = ", ".join(node) if isinstance(node, list) else node
    return row


PARETO = "Pareto front"  # the column of a study of several objectives


def ranked(df: Any, study: optuna.Study, problem: SearchProblem) -> Any:
    """`df` (`trials_frame`'s) best first, as the exported trial is chosen: feasible first;
    one objective: by its value; several: the Pareto front by distance to the ideal point
    (the compromise first), then the other trials by the first objective."""
    from ipu_tune.search import OBJECTIVES, front_distances

    first = OBJECTIVES[problem.objective_names[0]]
    front = front_distances(study, problem.directions)
    keys = ["feasible", first.axis()]
    ascending = [False, first.direction == "minimize"]
    if front:
        df = df.assign(_distance=df["trial"].map(front))
        keys, ascending = ["feasible", "_distance", *keys[1:]], [False, True, *ascending[1:]]
    out = df.sort_values(keys, ascending=ascending, kind="stable", na_position="last")
    return out.drop(columns=["_distance"], errors="ignore")


def _figure(value: Any) -> float | None:
    """A stored figure (a size, a rate) as a number when it can be one: finite and not
    negative; else None, shown as `-` (a store anyone can write may hold anything)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else None


def _sizes(stored: Any) -> list[float]:
    """The bytes per IPU a trial stored; none when any of them is no size."""
    sizes = [_figure(v) for v in stored] if isinstance(stored, list) else []
    return [] if None in sizes else [s for s in sizes if s is not None]


def trials_frame(study: optuna.Study, problem: SearchProblem) -> Any:
    """One row per finished trial: objectives (named with units; empty for an infeasible
    trial, which has no value), fit, memory, knobs, why it is infeasible; the mode when the
    trials differ in it (a study whose space fixed another mode: a training and an inference
    rate side by side are no ranking)."""
    import pandas as pd

    from ipu_tune.search import OBJECTIVES, check_stored_trials, front_distances

    # Its knobs are shown as each trial stored them (a `mode` column for an old study of two
    # modes), of the study's model and system only.
    check_stored_trials(problem, study, whole=False)
    front = front_distances(study, problem.directions)
    rows = []
    for t in study.get_trials(deepcopy=False, states=_FINISHED):
        rec = TrialRecord.of(t)
        memory = _sizes(rec.result.get("memory_per_ipu"))
        row: dict[str, Any] = {"trial": t.number}
        values = t.values if rec.feasible and t.values else [None] * len(problem.objective_names)
        for name, value in zip(problem.objective_names, values, strict=False):
            o = OBJECTIVES[name]
            if value is None:
                row[o.axis()] = None
            else:
                row[o.axis()] = int(value) if name == "changes" else value * o.scale
        if len(problem.directions) > 1:
            row[PARETO] = t.number in front
        row["fits"] = bool(rec.result.get("fits"))
        row["feasible"] = rec.feasible
        row["peak MB/IPU"] = max(memory) / 1e6 if memory else None
        if "throughput" not in problem.objective_names:
            row["samples/s"] = _figure(rec.result.get("throughput")) if row["fits"] else None
        row["bottleneck"] = rec.result.get("bottleneck")
        row.update(_knob_cells(rec.config))
        row["reason"] = rec.reason
        rows.append(row)
    frame = pd.DataFrame(rows)
    if "mode" in frame and frame["mode"].nunique(dropna=False) <= 1:
        frame = frame.drop(columns=["mode"])
    return frame
