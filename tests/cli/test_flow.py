"""One-way flow of the main command: the preflight's preparation is the run's (not redone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ipu_tune.cli.run as cli_run
import ipu_tune.tuner._run as tuner_run
from ipu_tune.tuner import Prepared, prepare


def test_the_main_command_prepares_its_run_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[Prepared] = []

    def counting(*args: Any, **kwargs: Any) -> Prepared:
        prepared.append(prepare(*args, **kwargs))  # the real preparation, counted
        return prepared[-1]

    monkeypatch.setattr(cli_run, "prepare", counting)
    monkeypatch.setattr(tuner_run, "prepare", counting)  # where `run` would prepare again
    monkeypatch.chdir(tmp_path)
    code = cli_run.hydra_main([f"results_dir={tmp_path}", "study.n_trials=2",
                               "study.progress_bar=false", "plan.precision=16.16"])
    assert code == 0
    assert len(prepared) == 1
    assert prepared[0].pinned == frozenset({"plan.precision"})
    assert (tmp_path / prepared[0].name / "best.yaml").exists()
