"""SIGINT and SIGTERM at any moment end the command with one line and exit 130/143, no
traceback; its workers stop too; the study is left consistent (no RUNNING trial, one row per
finished trial, exports whole or absent); a SIGKILLed command's workers do not outlive it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ipu_tune
from tests.conftest import REPO
from tests.tuner._inspect import study_state

NAME = "sig"


def _start(results: Path, n_trials: int, *extra: str) -> subprocess.Popen[str]:
    # Its own session, like a shell job: os.killpg is the terminal's Ctrl-C.
    return subprocess.Popen(
        [sys.executable, "-m", "ipu_tune", f"results_dir={results}", f"study.name={NAME}",
         f"study.n_trials={n_trials}", "study.progress_bar=false", *extra],
        cwd=results.parent, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _wait(ready: Callable[[], bool], timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _handles_sigterm(pid: int) -> bool:
    """ipu-tune's handlers are installed (Python itself catches SIGINT only)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(ln for ln in status.splitlines() if ln.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def _one_line(err: str, code: int, expected: int) -> None:
    assert code == expected, err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ipu-tune: interrupted by"), err


def _consistent(results: Path) -> None:
    state = study_state(results, NAME)
    assert not state["running"], "a trial of the interrupted run is left RUNNING"
    assert state["rows"] == sorted(state["complete"])  # type: ignore[type-var]
    best = results / NAME / "best.yaml"
    if best.exists():
        assert ipu_tune.evaluate(best).fits
    report = results / NAME / "report.html"
    if report.exists():
        assert report.read_text().rstrip().endswith("</html>")


def _trials_started(results: Path) -> Callable[[], bool]:
    journal = results / "ipu_tune.journal"
    return lambda: journal.exists() and journal.stat().st_size > 6000


@pytest.mark.slow
def test_sigint_during_start_up_is_one_line(tmp_path: Path) -> None:
    # From ipu-tune's first line on (a signal while the interpreter itself starts, before
    # any of ipu-tune runs, is Python's own traceback): the moment its handler shows in
    # /proc/PID/status, then a random delay over imports, composing and preparing.
    results = tmp_path / "results"
    rng = random.Random(3)
    for _ in range(8):
        proc = _start(results, 10_000)
        _wait(lambda p=proc.pid: _handles_sigterm(p) or not _alive(p))
        time.sleep(rng.uniform(0.0, 2.5))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        _one_line(err, proc.returncode, 130)


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_in_the_trial_loop_stops_cleanly(tmp_path: Path, sig: int, code: int) -> None:
    results = tmp_path / "results"
    proc = _start(results, 10_000)
    _wait(_trials_started(results))
    time.sleep(0.3)
    os.kill(proc.pid, sig)  # the process only (kill PID), not its group
    _, err = proc.communicate(timeout=120)
    _one_line(err, proc.returncode, code)
    _consistent(results)
    state = study_state(results, NAME)
    assert state["complete"], "the run should have finished some trials before the signal"


@pytest.mark.slow
def test_signal_during_the_export_leaves_exports_whole(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = _start(results, 20)
    assert first.wait(timeout=300) == 0
    best = results / NAME / "best.yaml"
    before = best.stat().st_mtime_ns
    proc = _start(results, 40)
    _wait(lambda: best.stat().st_mtime_ns > before)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:  # the signal may land after the last export: a normal end
        _one_line(err, proc.returncode, 143)
    _consistent(results)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_with_four_workers_stops_every_process(tmp_path: Path, sig: int) -> None:
    # Ctrl-C is not ignored with study.workers=4, and no worker outlives the command.
    results = tmp_path / "results"
    proc = _start(results, 10_000, "study.workers=4")
    _wait(_trials_started(results))
    workers = _children(proc.pid)
    assert len(workers) >= 4, workers
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # the terminal's Ctrl-C: every process of the job
    else:
        os.kill(proc.pid, sig)  # `kill PID`: the command forwards it to its workers
    _, err = proc.communicate(timeout=120)
    _one_line(err, proc.returncode, 128 + sig)
    _wait(lambda: not any(_alive(w) for w in workers), timeout_s=30)
    _consistent(results)


@pytest.mark.slow
def test_workers_of_a_sigkilled_command_stop(tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _start(results, 10_000, "study.workers=4")
    _wait(_trials_started(results))
    workers = _children(proc.pid)
    assert len(workers) >= 4, workers
    proc.kill()
    proc.communicate(timeout=60)
    # The kernel tells the workers their parent died (PDEATHSIG): they stop.
    _wait(lambda: not any(_alive(w) for w in workers), timeout_s=60)
    # Each stops between trials: what they leave is consistent; the next run recovers the
    # command's own trial if it was killed mid-trial.
    resumed = _start(results, len(study_state(results, NAME)["complete"]) + 3)  # type: ignore[arg-type]
    assert resumed.wait(timeout=300) == 0
    _consistent(results)


# The tuner with SIGTERM sent to itself while it writes its third export's temporary file.
_SIGTERM_IN_EXPORTS = """
import os, signal, sys
from ipu_tune import interrupts
interrupts.install()
from ipu_tune.__main__ import main
import ipu_tune.files as files
real, calls = files._write_temp, [0]
def write_temp(*args):
    calls[0] += 1
    if calls[0] == 3:
        os.kill(os.getpid(), signal.SIGTERM)
    return real(*args)
files._write_temp = write_temp
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_sigterm_while_the_exports_are_written_keeps_the_old_set(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = _start(results, 3, "model=mnist_cnn")
    assert first.wait(timeout=300) == 0
    folder = results / NAME
    before = {p.name: p.stat().st_ino for p in folder.iterdir()}
    proc = subprocess.run(
        [sys.executable, "-c", _SIGTERM_IN_EXPORTS, f"results_dir={results}",
         f"study.name={NAME}", "study.n_trials=6", "study.progress_bar=false", "model=mnist_cnn"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300)
    _one_line(proc.stderr, proc.returncode, 143)
    after = {p.name: p.stat().st_ino for p in folder.iterdir()}
    assert after == before, "exports replaced in part, or a temporary file left"
    _consistent(results)


def test_a_signal_during_the_shutdown_is_no_kill(tmp_path: Path) -> None:
    """After the command has written and printed everything, a signal cannot end the process
    by the signal (CPython restores the default handlers while it shuts down): it ends with
    its own code."""
    script = ("import os, signal, sys; from ipu_tune import interrupts; interrupts.install(); "
              "interrupts.finish(); os.kill(os.getpid(), signal.SIGTERM); sys.exit(0)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and not done.stderr
