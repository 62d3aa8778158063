"""The report's figures say what their names say: a plan that does not fit has no throughput
(never a point at 0 samples/s), a throughput axis never runs below 0, captions name the unit
the axis shows, and an invalid starting plan is called invalid, with no memory."""

from __future__ import annotations

import html
import re

import pytest

from ipu_tune.config import compose
from ipu_tune.report import trials_figure
from ipu_tune.report._study_figures import objective_history_figure
from ipu_tune.tuner import run


def _row(n: int, peak_mb: float, fits: bool, tp: float | None) -> dict[str, object]:
    return {"trial_number": n, "peak_memory_bytes": int(peak_mb * 1e6), "fits": fits,
            "throughput": tp, "memory_limit_bytes": int(940.6e6), "bottleneck": "x",
            "reason": None if fits else "IPU0 exceeds the 940.6 MB of the IPU"}


def test_plans_that_do_not_fit_are_apart_never_at_0_samples_per_second() -> None:
    fig = trials_figure([_row(0, 1400.6, False, None), _row(1, 870.0, True, 5994.0),
                         _row(2, 1300.0, False, 0.0)])
    fit, nofit = fig["data"][:2]
    assert fit["y"] == [5994.0]
    assert nofit["yaxis"] == "y2" and set(nofit["y"]) == {"does not fit"}
    assert 0.0 not in nofit["y"] and "samples/s" not in nofit["hovertemplate"]
    assert [c[1] for c in nofit["customdata"]] == ["1,400.6", "1,300.0"]  # the real peaks
    assert "exceeds" in nofit["customdata"][0][2] and "%{customdata[1]} MB" in (
        nofit["hovertemplate"])
    layout = fig["layout"]
    assert layout["yaxis"]["range"][0] == 0 and layout["yaxis2"]["type"] == "category"
    assert layout["yaxis2"]["domain"][1] < layout["yaxis"]["domain"][0]
    assert layout["xaxis"]["anchor"] == "y2"  # the memory axis under the strip


def test_the_history_of_a_throughput_never_runs_below_0() -> None:
    points = [{"trial": 0, "value": 10.0, "feasible": True, "reason": ""},
              {"trial": 1, "value": 5994.0, "feasible": True, "reason": ""},
              {"trial": 2, "value": None, "feasible": False, "reason": "does not fit"}]
    fig = objective_history_figure(points, "throughput (samples/s)", "maximize", 1)
    assert fig["layout"]["yaxis"]["range"][0] == 0.0
    assert min(fig["data"][-2]["y"]) >= 0.0  # the no-fit ticks sit on the axis' edge, 0


@pytest.fixture(scope="module")
def invalid_start_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    # Four IPUs, one replica, one stage: the starting plan breaks the plan rules.
    tmp = tmp_path_factory.mktemp("invalid")
    summary = run(compose([f"results_dir={tmp}", "model=resnet50", "system=pod4",
                           "study.n_trials=4", "study.progress_bar=false"]))
    return html.unescape((tmp / summary.study_name / "report.html").read_text())


def test_an_invalid_starting_plan_is_called_invalid_with_no_memory(
        invalid_start_report: str) -> None:
    text = invalid_start_report
    assert "your plan is invalid: system.num_ipus=4" in text
    assert "does not fit in memory" not in text
    ladder = text[text.index('data-table="ladder"'):]
    step0 = re.search(r"<tr[^>]*><td>0</td>(.*?)</tr>", ladder)
    assert step0 is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", step0.group(1))
    assert cells[1:3] == ["n/a", "n/a"] and "0 (0)" not in step0.group(1)


def test_time_by_phase_caption_names_the_axis_unit(invalid_start_report: str) -> None:
    assert "Milliseconds of one step by phase" in invalid_start_report
    assert "Seconds of one step" not in invalid_start_report


