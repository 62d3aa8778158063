"""`studies` says a study's best plan is exported only when its exports are on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipu_tune.cli.studies_cmd import list_main
from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_a_study_without_its_exports_is_not_said_to_be_exported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = run(compose([f"results_dir={tmp_path}", "study.n_trials=2",
                        "study.progress_bar=false"])).study_name
    capsys.readouterr()
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    (row,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(name)]
    assert row.endswith(", exported")
    # An interrupted study: trials stored, nothing exported yet.
    shutil.rmtree(tmp_path / name)
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    (row,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(name)]
    assert "not exported" in row and "report" in row
