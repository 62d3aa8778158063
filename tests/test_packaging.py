"""A built wheel, installed into a fresh venv, carries conf/ and search_spaces/ and runs."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(dist)],
        check=True, capture_output=True, cwd=tmp_path,
    )
    wheel = next(dist.glob("ipu_tune-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # Dependencies from this interpreter's site-packages, but not its editable ipu_tune.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                   check=True, capture_output=True)
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run([str(py), "-c", "import ipu_tune; print(ipu_tune.__file__)"],
                           check=True, capture_output=True, text=True, cwd=work).stdout
    assert str(venv) in where
    tune = subprocess.run(
        [str(py), "-m", "ipu_tune", "study.n_trials=3", "study.progress_bar=false"],
        capture_output=True, text=True, cwd=work, timeout=300,
    )
    assert tune.returncode == 0, tune.stderr
    best = work / "results" / "resnet101-mk2x2-throughput" / "best.yaml"
    ev = subprocess.run([str(py), "-m", "ipu_tune", "evaluate", str(best), "--json"],
                        capture_output=True, text=True, cwd=work)
    assert ev.returncode == 0, ev.stderr
    assert '"fits": true' in ev.stdout
