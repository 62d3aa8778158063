"""No exported plan says why: no trial finished, or a constraint other than memory. Before,
both said "no plan fits: every trial overflows the IPU's memory", the second with memory
remedies that all "fit" and a floor printed in 301 digits."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.cli import explain_cmd
from ipu_tune.cli._summary import format_summary
from ipu_tune.cli.explain_cmd import format_explain
from ipu_tune.config import compose
from ipu_tune.knobs import rate_text
from ipu_tune.tuner import run

_BASE = ["model=mnist_cnn", "study.progress_bar=false", "study.n_trials=3"]


def test_a_run_that_finished_no_trial_says_so(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The summary, its `next:` line and `explain` say no trial finished: before, `explain`
    said "no plan fits" and the summary offered it as "how this plan was reached"."""
    summary = run(compose([*_BASE, f"results_dir={tmp_path}", "study.timeout_s=1e-320"]))
    assert summary.n_complete == 0
    text = format_summary(summary)
    assert "no plan yet: no trial finished (the run stopped before its first trial ended" in text
    assert "overflows" not in text
    last = text.splitlines()[-1]
    assert last.startswith("next: python -m ipu_tune report ") and "ipu_tune explain" not in last
    assert explain_cmd.main([summary.study_name, "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no plan yet: no trial finished" in out and "no plan fits" not in out, out


def test_a_study_where_no_plan_fits_offers_explain_for_why_not(tmp_path: Path) -> None:
    summary = run(compose([*_BASE, f"results_dir={tmp_path}", "search=memory",
                           "search.throughput_floor=1e300"]))
    last = format_summary(summary).splitlines()[-1]
    assert last.startswith("next: python -m ipu_tune explain ")
    assert "(why no plan meets the search's constraints)" in last, last
    assert "how this plan was reached" not in last


def test_a_plan_below_the_throughput_floor_is_not_called_a_memory_overflow(
        tmp_path: Path) -> None:
    summary = run(compose([*_BASE, f"results_dir={tmp_path}", "search=memory",
                           "search.throughput_floor=1e300"]))
    assert summary.best_trial is None and summary.explanation is not None
    text = format_summary(summary)
    assert ("no plan meets the search's constraints: the trials that fit in memory miss the "
            "throughput floor") in text, text
    assert "fits in memory (peak " in text and "below the floor 1e+300 samples/s" in text
    assert "overflows" not in text and "remedies" not in text
    assert "no plan meets the search's constraints" in format_explain(summary.explanation)
    report = (tmp_path / summary.study_name / "report.html").read_text()
    assert "No plan meets the search&#x27;s constraints. Closest: trial" in report
    assert "Remedies" not in report


def test_a_rate_beyond_any_machine_is_printed_short() -> None:
    assert rate_text(1e300) == "1e+300 samples/s"
    assert rate_text(16998.4) == "16,998 samples/s" and rate_text(2.684) == "2.68 samples/s"


def test_studies_says_what_a_fit_study_missing_its_global_batch_misses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every trial fits in memory, none reaches the global batch (2 stages need more than the
    gradient accumulation 1 it allows): `studies` said "no plan fits"."""
    from ipu_tune.cli.studies_cmd import list_main

    summary = run(compose([*_BASE, f"results_dir={tmp_path}", "search=fit",
                           "search.global_batch_size=16", "workload.micro_batch_size=16",
                           "plan.replication_factor=1"]))
    assert summary.best_trial is None
    headline = ("no plan meets the search's constraints: the trials that fit in memory miss "
                "the global batch")
    assert headline in format_summary(summary)
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    row = [line for line in capsys.readouterr().out.splitlines()
           if line.startswith(summary.study_name)]
    assert len(row) == 1 and row[0].endswith(headline), row
    assert "no plan fits" not in row[0]
