"""A starting plan that is not a plan (1 replica, no splits, on 2 IPUs) is reported with its
reason and the step that made it valid; the ladder never shows it as `NO 0 (0)`."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.cli._summary import format_summary
from ipu_tune.cli.explain_cmd import format_explain
from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_an_invalid_starting_plan_is_reported_with_its_reason_and_what_was_used(
        tmp_path: Path) -> None:
    summary = run(compose([f"results_dir={tmp_path}", "study.n_trials=6",
                           "study.progress_bar=false"]))  # mk2 x2, 1 replica, no splits
    text = format_summary(summary)
    assert "your plan is invalid: system.num_ipus=2: must equal pipeline stages (1)" in text
    assert "the ladder continues from step 1 (your plan with replicas 1 -> 2)" in text
    assert "your plan does not fit" not in text
    assert "batch: micro-batch 64, global batch" in text
    assert f"next: python -m ipu_tune explain {summary.study_name}" in text
    assert summary.explanation is not None
    ladder = format_explain(summary.explanation)
    step0 = next(line for line in ladder.splitlines() if line.strip().startswith("0 "))
    assert "0 (0)" not in step0 and " n/a " in step0
    assert "your plan is invalid: " in ladder
