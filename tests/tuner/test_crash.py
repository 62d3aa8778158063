"""A study killed with SIGKILL at 20 moments (start-up, sampling, simulation, storage writes,
export) resumes each time with every finished trial and results row intact."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import ipu_tune
from tests.conftest import REPO
from tests.tuner._inspect import study_state

NAME = "crash"


def _start(results: Path, n_trials: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
         f"study.n_trials={n_trials}", "study.progress_bar=false"],
        cwd=results.parent, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _exports_are_whole(out_dir: Path) -> None:
    """Exports are written atomically: present means complete."""
    best = out_dir / "best.yaml"
    if best.exists():
        assert ipu_tune.evaluate(best).fits
    report = out_dir / "report.html"
    if report.exists():
        assert report.read_text().rstrip().endswith("</html>")


@pytest.mark.slow
def test_sigkill_at_twenty_moments_loses_nothing(tmp_path: Path) -> None:
    # Profile once so that the runs below start in about a second (a kill during the first,
    # cold profile would leave no cache, and every run would die in start-up).
    ipu_tune.profile({"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10})
    results = tmp_path / "results"
    rng = random.Random(7)
    finished_before: set[int] = set()
    moments: list[str] = []
    for kill in range(20):
        # Budgets grow so some runs are killed mid-trials and some during the final export.
        budget = 15 * (kill + 1)
        proc = _start(results, n_trials=budget)
        time.sleep(rng.uniform(1.5, 4.5))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if not (results / "ipu_tune.journal").exists():
            moments.append("start-up")
            continue
        state = study_state(results, NAME)
        assert finished_before <= state["complete"], f"kill {kill} lost finished trials"
        numbers = state["numbers"]
        assert len(numbers) == len(set(numbers))
        if state["running"] or len(state["complete"]) < budget:  # type: ignore[arg-type]
            moments.append("trials")
        else:
            moments.append("export")
        _exports_are_whole(results / NAME)
        finished_before = set(state["complete"])  # type: ignore[arg-type]
    # The kills must have hit both the trial loop and the exports at the end of a run.
    assert moments.count("trials") >= 3 and moments.count("export") >= 2, moments

    total = 15 * 20 + 5
    done = subprocess.run(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
         f"study.n_trials={total}", "study.progress_bar=false"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    state = study_state(results, NAME)
    assert finished_before <= state["complete"]
    assert len(state["complete"]) == total  # type: ignore[arg-type]
    assert not state["running"] and not state["waiting"]
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
    best = yaml.safe_load((results / NAME / "best.yaml").read_text())["ipu_tune"]
    study = state["study"]
    feasible = [t for t in study.get_trials(deepcopy=False)  # type: ignore[attr-defined]
                if t.values and all(c <= 0 for c in t.user_attrs["constraints"])]
    assert best["trial"] == max(feasible, key=lambda t: t.values[0]).number
