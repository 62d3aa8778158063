"""optuna-dashboard reads the default journal storage (the README's command)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import run_cli


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_dashboard_lists_the_study(tmp_path: Path) -> None:
    exe = shutil.which("optuna-dashboard")
    assert exe, "optuna-dashboard is a test dependency (pip install -e '.[test]')"
    tuned = run_cli(["study.n_trials=3", "study.progress_bar=false"], cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stderr
    port = _port()
    server = subprocess.Popen(
        [exe, str(tmp_path / "results" / "ipu_tune.journal"), "--host", "127.0.0.1",
         "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = None
        for _ in range(60):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies",
                                            timeout=2) as resp:
                    body = json.loads(resp.read())
                break
            except OSError:
                time.sleep(0.25)
        assert body is not None, "dashboard did not answer"
        names = [s["study_name"] for s in body["study_summaries"]]
        assert names == ["resnet101-mk2x2-throughput"]
    finally:
        server.terminate()
        server.wait(timeout=10)
