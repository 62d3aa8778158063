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
