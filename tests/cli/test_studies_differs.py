"""`studies` says, per study, what tells it from its neighbours (same model and system)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.cli.studies_cmd import list_main
from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_studies_of_one_model_and_system_show_what_differs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = [f"results_dir={tmp_path}", "study.n_trials=2", "study.progress_bar=false",
              "search=fit"]
    names = [run(compose([*common, *extra])).study_name
             for extra in ([], ["sampler=random"], ["+experiment=seed_resnet101"])]
    assert len(set(names)) == 3
    capsys.readouterr()
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    differs = {lines[i].split()[0]: lines[i + 1] for i in range(1, len(lines) - 1)
               if lines[i + 1].lstrip().startswith("differs:")}
    assert set(differs) == set(names)
    assert "sampler=tpe" in differs[names[0]] and "sampler=random" in differs[names[1]]
    assert "plan.pipeline.splits=[layer3.8]" in differs[names[2]]
    assert "plan.pipeline.splits=[]" in differs[names[0]]
