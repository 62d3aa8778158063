"""The table that ends a `-m` sweep: one row per run, best objective with unit, plan highlights."""

from __future__ import annotations

import ipu_tune
from ipu_tune.cli._comparison import format_comparison
from ipu_tune.config import load_config
from ipu_tune.tuner import RunSummary


def _summary(name: str, num_ipus: int, replicas: int) -> RunSummary:
    plan = {"replication_factor": replicas, "gradient_accumulation": 8}
    cfg = load_config({"system": {"num_ipus": num_ipus}, "plan": plan})
    result = ipu_tune.evaluate(cfg)
    return RunSummary(name, "journal", 12, 12, (), 3, cfg, result)


def test_one_row_per_run_with_its_figures_and_plan() -> None:
    runs = [_summary("a-mk2x2", 2, 2), _summary("b-mk2x4", 4, 4)]
    runs.append(RunSummary("c-none", "journal", 5, 5, (), None, None, None))
    lines = format_comparison(runs).splitlines()
    assert lines[0] == "sweep of 3 runs:"
    header, *rows = lines[1:]
    for column in ("study", "trials", "best objective", "samples/s", "peak MB/IPU", "plan"):
        assert column in header
    assert len(rows) == 3
    for row, run in zip(rows[:2], runs, strict=False):
        assert run.best_result is not None
        assert row.startswith(run.study_name)
        assert f"{run.best_result.throughput:,.0f}" in row
        assert f"throughput {run.best_result.throughput:,.6g} samples/s" in row
        assert f"{run.best_result.memory_per_ipu[0] / 1e6:,.0f}" in row
        assert f"1 stage(s) x {run.best_config.plan.replication_factor} replica(s)" in row  # type: ignore[union-attr]
    assert rows[2].startswith("c-none") and rows[2].endswith("no plan fits")
    # Columns line up: every row has the plan column at the header's offset.
    offset = header.index("plan")
    assert all(row[offset - 2 : offset] == "  " for row in rows)
