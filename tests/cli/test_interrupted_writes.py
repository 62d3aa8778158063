"""`report` interrupted or out of disk while it writes the exports: one accurate line, the old
set of files or the new one (never a mix), no temporary left; stale ones are removed."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

EXPORTS = ("best.yaml", "poptorch_options.py", "popart_options.py", "tf_ipu_config.py",
           "report.html")

# `report` with `os.<function>` sending SIGINT to the process at its N-th call: the Ctrl-C
# lands at a known point of the write (`os.fsync`: a temporary written; `os.replace`: a rename).
_SCRIPT = """
import os, signal, sys
from ipu_tune import interrupts
interrupts.install()
from ipu_tune.__main__ import main
function, at = sys.argv[1], int(sys.argv[2])
real, calls = getattr(os, function), [0]
def patched(*args, **kwargs):
    calls[0] += 1
    if calls[0] == at:
        os.kill(os.getpid(), signal.SIGINT)
    return real(*args, **kwargs)
setattr(os, function, patched)
main(["report", "s", "--results-dir", sys.argv[3]])
"""


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """results_dir of a stored study `s` with its exports."""
    proc = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=2",
                    "study.progress_bar=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "results"


def _inodes(folder: Path) -> dict[str, int]:
    return {n: (folder / n).stat().st_ino for n in EXPORTS}


def _interrupted_report(results: Path, function: str, at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SCRIPT, function, str(at), str(results)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)


def _one_report_line(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("ipu-tune: interrupted by SIGINT; the exports and report.html"), line
    assert "resume" not in line and "trials are kept" not in line, line


@pytest.mark.slow
def test_ctrl_c_while_the_temporaries_are_written_replaces_none(stored: Path) -> None:
    folder = stored / "s"
    before = _inodes(folder)
    proc = _interrupted_report(stored, "fsync", 3)  # after two temporaries
    _one_report_line(proc)
    assert _inodes(folder) == before, "some exports were replaced, others not"
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXPORTS)


@pytest.mark.slow
def test_ctrl_c_during_the_renames_waits_for_the_last(stored: Path) -> None:
    folder = stored / "s"
    before = _inodes(folder)
    proc = _interrupted_report(stored, "replace", 1)
    _one_report_line(proc)
    after = _inodes(folder)
    assert all(after[n] != before[n] for n in EXPORTS), "a mixed set of exports"
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXPORTS)


@pytest.mark.slow
def test_a_full_disk_leaves_the_old_set(stored: Path) -> None:
    folder = stored / "s"
    before = _inodes(folder)
    limit = (folder / "report.html").stat().st_size // 2  # the report's temporary hits it

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "ipu_tune", "report", "s", "--results-dir", str(stored)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300, preexec_fn=small_files)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "File too large" in proc.stderr, proc.stderr
    assert proc.stderr.count("raise the file-size limit (ulimit -f)") == 1, proc.stderr
    assert _inodes(folder) == before, "a new best.yaml beside the old report"
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXPORTS)


@pytest.mark.slow
def test_stale_temporaries_are_removed_by_the_next_report(stored: Path) -> None:
    folder = stored / "s"
    stale = [".popart_options.py.ipu-tune-sh3p9976.tmp", ".report.html.ipu-tune-ab_12xyz.tmp",
             ".best.yaml.ipu-tune-k2j4h5g6.tmp"]
    # A user's files, however like a temporary (no `ipu-tune-` marker): kept.
    mine = [".mine.txt.abcdefgh", ".best.yaml.backup01", ".report.html.20250101.tmp"]
    for name in [*stale, *mine]:
        (folder / name).write_text("x")
    proc = run_cli(["report", "s", "--results-dir", str(stored)], cwd=stored.parent)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([*EXPORTS, *mine])


@pytest.mark.slow
def test_signal_line_of_the_table_export(stored: Path) -> None:
    script = _SCRIPT.replace('["report", "s", "--results-dir", sys.argv[3]]',
                             '["export", "s", "--output", sys.argv[3] + "/t.csv", '
                             '"--results-dir", sys.argv[3]]')
    proc = subprocess.run([sys.executable, "-c", script, "fsync", "1", str(stored)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.startswith("ipu-tune: interrupted by SIGINT; --output is unchanged")
    assert not [p for p in stored.iterdir() if "t.csv" in p.name]


@pytest.mark.slow
def test_signal_line_of_a_command_that_only_reads(stored: Path) -> None:
    """Ctrl-C during `trials` said "finished trials are kept, run the same command again to
    resume", as if it had been tuning."""
    script = _SCRIPT.replace('["report", "s", "--results-dir", sys.argv[3]]',
                             '["trials", "s", "--results-dir", sys.argv[3]]')
    proc = subprocess.run([sys.executable, "-c", script, "stat", "1", str(stored)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == ("ipu-tune: interrupted by SIGINT; the command only reads, nothing "
                           "of it is left half-done; run it again\n"), proc.stderr


@pytest.mark.parametrize(("command", "line"), [
    ("export", "--output is unchanged or whole, never half-written"),
    ("report", "the exports and report.html on disk are whole"),
    ("trials", "the command only reads, nothing of it is left half-done"),
    ("model=resnet50", "finished trials are kept"),
])
def test_a_signal_during_the_first_imports_says_what_the_command_leaves(
        command: str, line: str) -> None:
    """Ctrl-C while `export` or `report` was still importing said "finished trials are kept, run
    the same command again to resume": the command's own line holds from the first import."""
    script = (f"import sys; sys.argv = ['-m', {command!r}, 's']; import ipu_tune, os, signal; "
              "os.kill(os.getpid(), signal.SIGINT); import time; time.sleep(30)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 130
    assert proc.stderr.startswith(f"ipu-tune: interrupted by SIGINT; {line}"), proc.stderr
    assert proc.stderr.count("\n") == 1
