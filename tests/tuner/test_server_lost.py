"""A PostgreSQL server that dies under a run (one worker or several) ends the command with one
line and exit 1 (a fault: the same command resumes once the server answers), not a traceback
of SQLAlchemy's."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests._pg import pg_bin_dir, postgres_server
from tests.conftest import REPO


def _postmaster(url: str) -> int:
    """The PID of the server `postgres_server` started for `url` (found by its port)."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    for pid_file in glob.glob(os.path.join(tempfile.gettempdir(), "ipu_tune_pg_*", "data",
                                           "postmaster.pid")):
        lines = Path(pid_file).read_text().splitlines()
        if len(lines) > 3 and lines[3].strip() == port:
            return int(lines[0])
    raise AssertionError(f"no server on port {port}")


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_server_that_dies_mid_run_is_one_line(tmp_path: Path, workers: int) -> None:
    if pg_bin_dir() is None:
        pytest.skip("PostgreSQL server binaries missing")
    with postgres_server() as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ipu_tune", "model=mnist_cnn", "study.name=lost",
             "study.n_trials=100000", "study.progress_bar=false", f"study.storage={url}",
             f"results_dir={tmp_path / 'results'}", f"study.workers={workers}"],
            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(8)  # composed, profiled, and in the trial loop
        assert proc.poll() is None, proc.communicate()
        os.kill(_postmaster(url), signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 1, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("ipu-tune: error: the database server stopped answering ("), err
    assert err.rstrip().endswith("run the same command again once the server answers, to "
                                 "resume"), err
