"""A study killed with SIGKILL at 20 moments (start-up, sampling, simulation, storage writes,
export) resumes each time with every finished trial and results row intact."""

from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

import ipu_tune
from ipu_tune.records import TrialRecord
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


def _wait(ready: Callable[[], bool], timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < end:
        time.sleep(0.01)


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
    journal = results / "ipu_tune.journal"
    best_yaml = results / NAME / "best.yaml"
    budget = 0
    for kill in range(20):
        # Aim each kill: start-up, the trial loop (once trials are being written), or the
        # export at the end of the run (once best.yaml is being replaced); then classify
        # where it landed from what the storage holds.
        aim = ("start-up", "trials", "trials", "export", "trials")[kill % 5]
        budget += 60
        size_before = journal.stat().st_size if journal.exists() else 0
        mtime_before = best_yaml.stat().st_mtime_ns if best_yaml.exists() else 0
        proc = _start(results, n_trials=budget)
        if aim == "start-up":
            time.sleep(rng.uniform(0.1, 0.8))
        elif aim == "trials":
            _wait(lambda s=size_before: journal.exists() and journal.stat().st_size > s + 4000)
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            _wait(lambda m=mtime_before: best_yaml.exists() and best_yaml.stat().st_mtime_ns > m)
            time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if not journal.exists():
            moments.append("start-up")
            continue
        state = study_state(results, NAME)
        assert finished_before <= state["complete"], f"kill {kill} lost finished trials"
        numbers = state["numbers"]
        assert len(numbers) == len(set(numbers))
        if len(state["complete"]) == len(finished_before):  # type: ignore[arg-type]
            moments.append("start-up")
        elif state["running"] or len(state["complete"]) < budget:  # type: ignore[arg-type]
            moments.append("trials")
        else:
            moments.append("export")
        _exports_are_whole(results / NAME)
        finished_before = set(state["complete"])  # type: ignore[arg-type]
        budget = len(finished_before)
    # The kills must have hit both the trial loop and the exports at the end of a run.
    assert moments.count("trials") >= 3 and moments.count("export") >= 2, moments

    total = budget + 25
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
                if t.values and TrialRecord.of(t).feasible]
    assert best["trial"] == max(feasible, key=lambda t: t.values[0]).number


@contextlib.contextmanager
def _small_tmpfs(where: Path, size: str = "16m") -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for the disk-full test: "
                    f"{mounted.stderr.strip() or 'mount refused'} (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(directory: Path) -> Path:
    """Take every free byte of the file system (ENOSPC for the next write)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


@pytest.mark.slow
def test_disk_full_during_a_run_is_one_line_and_resume_recovers(tmp_path: Path) -> None:
    ipu_tune.profile({"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10})
    # Room for the journal and the report (report.html embeds plotly.js, about 4 MB); the
    # filler then takes every byte left during the trial loop.
    with _small_tmpfs(tmp_path / "small") as disk:
        results = disk / "results"
        journal = results / "ipu_tune.journal"
        proc = _start(results, n_trials=100_000)
        _wait(lambda: journal.exists() and journal.stat().st_size > 20_000)
        filler = _fill(disk)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        # Not a traceback, nor a torn journal record that later runs cannot read.
        assert proc.returncode not in (0, None), err
        assert "Traceback" not in err, err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1, err
        assert "No space left on device" in lines[0] or "disk is full" in lines[0], err
        filler.unlink()  # free the space
        finished = set(study_state(results, NAME)["complete"])  # type: ignore[arg-type]
        assert finished, "the run should have finished trials before the disk filled"
        total = len(finished) + 5
        done = subprocess.run(
            [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
             f"study.n_trials={total}", "study.progress_bar=false"],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True, text=True, timeout=300,
        )
        assert done.returncode == 0, done.stderr
        state = study_state(results, NAME)
        assert finished <= state["complete"]  # every finished trial recovered
        assert len(state["complete"]) == total  # type: ignore[arg-type]
        assert not state["running"]
        assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
        _exports_are_whole(results / NAME)
