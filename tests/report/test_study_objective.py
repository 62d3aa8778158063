"""The report follows the study: its objective's column and order, and only the knobs its
plans run (as `explain` and the plan line, `knobs.describe`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ipu_tune.config import compose
from ipu_tune.report._table import top_trials_table
from ipu_tune.search import OBJECTIVES
from ipu_tune.tuner import RunSummary, run

HOST_HEADERS = ("prefetch", "8-bit I/O", "async loader", "workers", "instances")
HOST_FIELDS = ("prefetch_depth", "eight_bit_io", "async_dataloader", "dataloader_workers",
               "host_instances")


def _table(page: str, name: str) -> tuple[list[str], list[list[str]]]:
    """(headers, cell texts per row) of the table `data-table=name`."""
    at = page.index(f'data-table="{name}"')
    body = page[at:page.index("</table>", at)]
    head = re.findall(r"<th[^>]*>([^<]*)</th>", body)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r)
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]
    return head, [r for r in rows if r]


def _plan_list(page: str) -> str:
    return page[page.index("<h2>Best plan"):page.index("Memory by category")]


@pytest.fixture(scope="module")
def latency(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, str]:
    out = tmp_path_factory.mktemp("latency")
    summary = run(compose([f"results_dir={out}", "model=bert_large_squad", "system=pod4",
                           "search=latency", "workload.mode=infer", "study.n_trials=16",
                           "study.progress_bar=false"]),
                  frozenset({"model", "system", "search", "workload.mode"}))
    return summary, Path(summary.exports["report"]).read_text()


def test_a_latency_report_ranks_its_trials_by_latency(latency: tuple[RunSummary, str]) -> None:
    summary, page = latency
    assert "By latency per call (lowest first)" in page
    head, rows = _table(page, "top_trials")
    col = head.index("latency per call (ms)")
    shown = [float(r[col]) for r in rows if r[col] != "-"]
    assert len(shown) >= 2 and shown == sorted(shown)
    best = summary.objectives["latency"] * 1e3
    assert rows[0][col] == f"{best:,.3f}"  # the exported trial's latency heads the table
    assert int(rows[0][head.index("trial")]) == summary.best_trial or shown[0] == shown[1]


def test_a_latency_report_shows_latency_in_its_ladder_and_sensitivity(
        latency: tuple[RunSummary, str]) -> None:
    summary, page = latency
    best = OBJECTIVES["latency"].show(summary.objectives["latency"])
    head, rows = _table(page, "ladder")
    col = head.index("latency per call")
    assert rows[-1][col] == best  # the last step is the exported plan
    assert all(r[col] == "-" or r[col].endswith(" ms") for r in rows)
    head, rows = _table(page, "sensitivity")
    col = head.index("latency per call")
    assert head[col + 1] == "change" and rows
    assert all(r[col] == "-" or r[col].endswith(" ms") for r in rows)
    assert any(r[col + 1].endswith("%") for r in rows)


def test_an_inference_report_leaves_out_the_knobs_of_training(
        latency: tuple[RunSummary, str]) -> None:
    _, page = latency
    head, _ = _table(page, "top_trials")
    assert not {"grad. acc.", "recompute", "offload opt.", "RTS"} & set(head)
    plan = _plan_list(page)
    assert "gradient_accumulation" not in plan and "recompute" not in plan
    assert "device_iterations" in plan


def test_a_synthetic_data_report_leaves_out_the_host_knobs(tmp_path: Path) -> None:
    summary = run(compose([f"results_dir={tmp_path}", "model=resnet18", "system=pod4",
                           "model.dataset.name=synthetic", "study.n_trials=6",
                           "study.progress_bar=false"]),
                  frozenset({"model", "system", "model.dataset.name"}))
    page = Path(summary.exports["report"]).read_text()
    head, _ = _table(page, "top_trials")
    assert not set(HOST_HEADERS) & set(head)
    assert "micro-batch" in head and "grad. acc." in head
    plan = _plan_list(page)
    assert not [f for f in HOST_FIELDS if f">{f}<" in plan]
    assert ">io_tiles<" in plan  # on the IPU: not a host knob


def _row(n: int, tp: float | None, latency: float | None, fits: bool = True) -> dict[str, Any]:
    return {"trial_number": n, "state": "COMPLETE" if latency is not None else "PRUNED",
            "throughput": tp, "fits": fits, "peak_memory_bytes": 1e8 * (n + 1),
            "values": None if latency is None else json.dumps([latency])}


def test_the_trials_table_ranks_by_the_first_objective_in_its_direction() -> None:
    rows = [_row(0, 900.0, 0.009), _row(1, 1500.0, 0.007), _row(2, 1200.0, 0.002),
            _row(3, 1400.0, None), _row(4, None, None, fits=False)]
    page = top_trials_table(rows, 10, exported=2, objectives=[OBJECTIVES["latency"]])
    head, cells = _table(page, "top_trials")
    assert head[:4] == ["#", "trial", "latency per call (ms)", "samples/s"]
    # Lowest latency first; a plan that fits without a value (another constraint missed) after,
    # then the plan that does not fit.
    assert [r[1] for r in cells] == ["2", "1", "0", "3", "4"]
    assert [r[2] for r in cells] == ["2.000", "7.000", "9.000", "-", "-"]
    by_throughput = top_trials_table(rows, 10, exported=1)
    assert [r[1] for r in _table(by_throughput, "top_trials")[1]] == ["1", "3", "2", "0", "4"]


def test_the_trials_table_leaves_a_knob_a_plan_does_not_run_empty() -> None:
    """A 32.32 trial's partials type is not run: its cell is empty, an fp16 trial's shows; the
    schedule, which no one-stage trial shown runs, has no column."""
    from ipu_tune.knobs import moot_keys
    from ipu_tune.report._table import knob_values

    def plan_row(n: int, precision: str) -> dict[str, Any]:
        return {**_row(n, 1000.0 + n, None), "state": "COMPLETE", "mode": "infer",
                "precision": precision, "partials": "half", "pipeline_splits": "[]",
                "pipeline_schedule": "grouped", "replication_factor": 1}

    def moot(row: dict[str, Any]) -> frozenset[str]:
        return moot_keys({**knob_values(row), "model.dataset.name": "imagenet"}, "image")

    page = top_trials_table([plan_row(0, "32.32"), plan_row(1, "16.16")], 10, moot=moot)
    head, cells = _table(page, "top_trials")
    assert "partials" in head and "schedule" not in head
    column = head.index("partials")
    assert [r[column] for r in cells] == ["half", ""]  # trial 1 (16.16) first: faster
