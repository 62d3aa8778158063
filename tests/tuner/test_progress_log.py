"""The progress bar does not flood a log: into a pipe it is a line every 30 s, not per trial."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli


def test_progress_bar_into_a_pipe_writes_a_few_lines_not_one_per_trial(tmp_path: Path) -> None:
    done = run_cli(["study.n_trials=40", f"results_dir={tmp_path}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bar_lines = [x for x in done.stderr.replace("\r", "\n").splitlines() if x.startswith("trials")]
    assert 1 <= len(bar_lines) <= 6, bar_lines
    assert "40/40" in bar_lines[-1]
