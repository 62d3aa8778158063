"""Fixtures shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def stored_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results_dir of a stored study `s` for the report/export cases."""
    root = tmp_path_factory.mktemp("stored")
    proc = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=2",
                    "study.progress_bar=false"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root / "results"
