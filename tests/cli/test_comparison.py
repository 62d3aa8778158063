"""The table that ends a `-m` sweep: one row per run, best objective with unit, plan highlights."""

from __future__ import annotations

from pathlib import Path

import ipu_tune
from ipu_tune.cli._comparison import format_comparison
from ipu_tune.config import load_config
from ipu_tune.tuner import RunSummary
from tests.conftest import run_cli


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
        assert f"throughput {run.best_result.throughput:,.0f} samples/s" in row
        assert f"{run.best_result.memory_per_ipu[0] / 1e6:,.0f}" in row
        assert f"1 stage(s) x {run.best_config.plan.replication_factor} replica(s)" in row  # type: ignore[union-attr]
        assert "micro-batch 64, precision 32.32, GA 8, DI 1, recompute auto" in row
        assert "AMP per IPU" not in row  # at its default: an empty list, not the tuple ()
    assert rows[2].startswith("c-none") and rows[2].endswith("no plan fits")
    # Columns line up: every row has the plan column at the header's offset.
    offset = header.index("plan")
    assert all(row[offset - 2 : offset] == "  " for row in rows)


def test_a_run_whose_plan_does_not_fit_has_no_samples_per_second() -> None:
    cfg = load_config({"system": {"num_ipus": 1}, "workload": {"micro_batch_size": 4096}})
    result = ipu_tune.evaluate(cfg)
    assert not result.fits
    lines = format_comparison([RunSummary("big", "journal", 3, 3, (), None, cfg, result)])
    header, row = lines.splitlines()[1:]
    at = header.index("samples/s")
    assert row[at:at + len("samples/s")].strip() == "-"


def test_a_sweep_ends_with_one_comparison_table(tmp_path: Path) -> None:
    proc = run_cli(
        ["-m", "system.num_ipus=2,4", "study.n_trials=3", "study.progress_bar=false"],
        cwd=tmp_path,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("sweep of 2 runs:") == 1
    table = out[out.index("sweep of 2 runs:") :].splitlines()
    assert table[1].split()[:2] == ["study", "trials"]
    assert [row.split()[0] for row in table[2:4]] == [
        "resnet101-mk2x2-throughput",
        "resnet101-mk2x4-throughput",
    ]
    assert all("samples/s" in row for row in table[2:4])


def test_a_multi_instance_plan_prints_its_poprun_line(tmp_path: Path) -> None:
    proc = run_cli(
        ["system.num_ipus=4", "system.hosts=2", "plan.host_instances=2",
         "plan.replication_factor=4", "study.n_trials=3", "study.progress_bar=false"],
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PopRun"))
    assert line.endswith(
        "poprun --num-instances 2 --num-replicas 4 --ipus-per-replica 1 --host host0,host1"
        " python poptorch_options.py"
    )
    best = next((tmp_path / "results").glob("*/best.yaml")).read_text()
    assert "poprun: poprun --num-instances 2" in best
    for name in ("poptorch_options.py", "popart_options.py", "tf_ipu_config.py"):
        assert next((tmp_path / "results").glob(f"*/{name}")).is_file()


def test_a_sweep_of_inference_runs_shows_latency_and_no_moot_highlights() -> None:
    infer = load_config({"workload": {"mode": "infer"}, "system": {"num_ipus": 2},
                         "plan": {"replication_factor": 2}})
    synthetic = load_config({"model": {"dataset": {"name": "synthetic"}},
                             "system": {"num_ipus": 2},
                             "plan": {"replication_factor": 2, "host_instances": 2}})
    runs = [RunSummary(n, "journal", 3, 3, (), 1, c, ipu_tune.evaluate(c))
            for n, c in (("infer", infer), ("synthetic", synthetic))]
    header, *rows = format_comparison(runs).splitlines()[1:]
    at = header.index("latency ms/call")
    latency = runs[0].best_result
    assert latency is not None and latency.fits
    assert rows[0][at:at + 15].strip() == f"{latency.latency_s * 1e3:,.3f}"
    assert rows[1][at:at + 15].strip() == "-"  # a training run: no caller waits on a step
    assert "instances" not in rows[1]  # no host pipeline with synthetic data
    assert "latency" not in format_comparison(runs[1:])
