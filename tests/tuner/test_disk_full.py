"""A full disk in the trial loop, with one worker or several: one line naming the journal and
the error, exit 1, no traceback and no torn record; the trial it could not store is failed on
resume as not stored because of the full disk (not as a worker that died), and the resume
reaches the total."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from tests.conftest import REPO, run_cli
from tests.tuner._inspect import study_state

# The tuner with a disk that fills at the N-th write to the journal: half of that write lands,
# then ENOSPC, as the kernel does on a full disk; every later journal write fails at once.
_SCRIPT = """
import errno, os, sys
from ipu_tune import interrupts
interrupts.install()
from ipu_tune.__main__ import main
at, calls, real = int(sys.argv[1]), [0], os.write
def write(fd, data):
    try:
        journal = os.readlink(f"/proc/self/fd/{fd}").endswith(".journal")
    except OSError:
        journal = False
    if journal:
        calls[0] += 1
        if calls[0] == at and len(data) > 1:
            real(fd, bytes(data[: len(data) // 2]))
        if calls[0] >= at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real(fd, data)
os.write = write
main(sys.argv[2:])
"""

NAME = "full"


def _args(results: Path, n_trials: int, workers: int = 1) -> list[str]:
    return ["model=mnist_cnn", f"results_dir={results}", f"study.name={NAME}",
            f"study.n_trials={n_trials}", "study.progress_bar=false", f"study.workers={workers}"]


def _on_a_disk_that_fills(results: Path, at: int, workers: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, str(at), *_args(results, 40, workers)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_trial_lost_to_a_full_disk_says_so(tmp_path: Path, workers: int) -> None:
    results = tmp_path / "results"
    full = _on_a_disk_that_fills(results, 30, workers)
    assert full.returncode == 1, full.stderr
    assert "Traceback" not in full.stderr and full.stderr.count("\n") == 1, full.stderr
    line = full.stderr.strip()
    journal = results / "ipu_tune.journal"
    assert f"disk error writing {str(journal)!r}: {os.strerror(errno.ENOSPC)}" in line, line
    assert "free space" in line and "killed" not in line, line
    if workers > 1:  # the workers' errors, in the command's one line
        assert line.startswith("ipu-tune: error: study.workers=2: worker "), line
        assert "stopped: disk error writing" in line, line
    assert journal.read_bytes().endswith(b"\n")  # the half-written record was cut
    finished = study_state(results, NAME)["complete"]
    resumed = run_cli(_args(results, len(finished) + 3), cwd=tmp_path)  # type: ignore[arg-type]
    assert resumed.returncode == 0, resumed.stderr
    assert "torn" not in resumed.stderr, resumed.stderr
    state = study_state(results, NAME)
    assert finished <= state["complete"]  # type: ignore[operator]
    assert len(state["complete"]) == len(finished) + 3  # type: ignore[arg-type]
    failed = [t.system_attrs.get("fail_reason", "")
              for t in state["study"].get_trials(  # type: ignore[attr-defined]
                  deepcopy=False, states=(TrialState.FAIL,)) if not t.user_attrs.get("surplus")]
    assert failed, "the trial the full disk stopped should be failed"
    for reason in failed:
        assert reason.startswith(f"not stored: disk error writing {str(journal)!r}: "
                                 f"{os.strerror(errno.ENOSPC)} (worker "), failed


@pytest.mark.parametrize("storage", [[], ["study.storage=sqlite:///results.db"]])
def test_a_file_size_limit_at_the_start_says_to_raise_it_and_leaves_no_file(
        tmp_path: Path, storage: list[str]) -> None:
    """`ulimit -f 8`: SQLite words the refused write (EFBIG) "disk I/O error". Before, the line
    said only "free space", and an empty journal, results.db and its -wal and -shm stayed."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8 * 1024, 8 * 1024))

    proc = subprocess.run(
        [sys.executable, "-m", "ipu_tune", "model=mnist_cnn", "study.n_trials=2",
         "study.progress_bar=false", f"results_dir={tmp_path / 'res'}", *storage],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
        text=True, timeout=300, preexec_fn=small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "raise the file-size limit (ulimit -f, now 8 KiB)" in proc.stderr, proc.stderr
    assert [p for p in tmp_path.rglob("*") if not p.is_dir()] == []


def test_a_file_size_limit_under_a_sqlite_study_names_its_file(tmp_path: Path) -> None:
    """SQLite words a write the file-size limit refused "disk I/O error", without a path: the
    line said "disk error writing the results database" of the study's own file. It names
    the file as the user did, as a journal's line names the journal."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200 * 1024, 200 * 1024))

    proc = subprocess.run(
        [sys.executable, "-m", "ipu_tune", "model=mnist_cnn", "study.n_trials=300",
         "study.progress_bar=false", "study.storage=sqlite:///results/s.db"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
        text=True, timeout=300, preexec_fn=small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(
        "ipu-tune: error: disk error writing 'results/s.db': disk i/o error; raise the "
        "file-size limit (ulimit -f, now 200 KiB)"), proc.stderr
