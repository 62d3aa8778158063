"""`trials` prints a table a terminal shows: constant columns once, no None/NaN cells."""

from __future__ import annotations

import math

import pandas as pd

from ipu_tune.cli.studies_cmd import readable_table


def test_trials_table_says_constant_columns_once_and_shows_empty_cells_as_dashes() -> None:
    df = pd.DataFrame({
        "trial": [1, 2], "throughput": [10201.9, math.nan], "fits": [True, False],
        "feasible": [True, False], "peak MB/IPU": [650.5, 973.2], "bottleneck": ["a", "b"],
        "micro-batch": [64, 64], "pipeline splits": ["layer3.9", None], "schedule": ["", ""],
    })
    text = readable_table(df)
    head, *rows = text.splitlines()
    assert head == "same in every row: micro-batch 64, schedule -"
    assert "None" not in text and "NaN" not in text and "nan" not in text
    assert "micro-batch" not in rows[0] and "pipeline splits" in rows[0]
    assert rows[2].split()[1:4] == ["-", "no", "no"]


def test_a_float_column_has_one_format_whatever_its_values() -> None:
    df = pd.DataFrame({
        "trial": [1, 2, 3], "throughput (samples/s)": [4000.0, 79.6618, math.nan],
        "fits": [True, True, False], "feasible": [True, True, False],
        "peak MB/IPU": [650.5, 973.2, 1400.6], "bottleneck": ["a", "b", "c"],
        "AMP": [0.6, 0.55, 0.123456],
    })
    rows = [line.split() for line in readable_table(df).splitlines()[1:]]
    assert [r[1] for r in rows] == ["4,000.0", "79.7", "-"]
    assert [r[-1] for r in rows] == ["0.6", "0.55", "0.123"]


def test_where_and_sort_take_a_column_by_its_documented_unit_or_its_bare_name() -> None:
    from ipu_tune.cli._trials_table import filter_rows as _filter

    df = pd.DataFrame({"trial": [1, 2], "throughput (samples/s)": [4000.0, 6000.0]})
    assert list(_filter(df, "samples/s>5000")["trial"]) == [2]
    assert list(_filter(df, "throughput<5000")["trial"]) == [1]
    assert list(_filter(df, "throughput (samples/s)>=4000")["trial"]) == [1, 2]
