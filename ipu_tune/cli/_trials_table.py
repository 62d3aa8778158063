"""The `trials` table: its columns named by the user, its filters, its cells as a terminal
shows them."""

from __future__ import annotations

import math
from typing import Any

from ipu_tune.errors import IpuTuneError

__all__ = ["column_named", "filter_rows", "readable_table"]

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


def filter_rows(df: Any, spec: str) -> Any:
    """Rows of `df` matching `COLUMN<op>VALUE` (op one of >=, <=, !=, =, >, <)."""
    for op in _OPS:
        if op in spec:
            col, _, raw = spec.partition(op)
            col, raw = col.strip(), raw.strip()
            break
    else:
        raise IpuTuneError(f"--where={spec!r}: expected COLUMN=VALUE (or >, <, >=, <=, !=)")
    series = df[column_named(df, col, f"--where={spec!r}")]
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
