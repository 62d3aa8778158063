"""The documented storage examples run in an empty folder; a SQLite file's folder is created
inside results_dir, and outside it a missing folder is one line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

_SMALL = ["study.n_trials=3", "study.progress_bar=false"]


def _documented(scheme: str) -> list[str]:
    """The arguments of the documented `python -m ipu_tune study.storage=<scheme>...` line."""
    text = (REPO / "docs" / "storage.md").read_text()
    line = re.search(rf"^python -m ipu_tune (study\.storage={scheme}://\S+)", text, re.M)
    assert line is not None, f"no {scheme} example in docs/storage.md"
    return shlex.split(line.group(1))


@pytest.mark.slow
def test_the_documented_sqlite_example_runs_in_an_empty_folder(tmp_path: Path) -> None:
    args = _documented("sqlite")
    assert args == ["study.storage=sqlite:///results/studies.db"]
    done = run_cli([*args, *_SMALL], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "best: trial" in done.stdout and "Traceback" not in done.stderr
    assert (tmp_path / "results" / "studies.db").is_file()


@pytest.mark.slow
def test_the_documented_postgresql_example_runs_in_an_empty_folder(tmp_path: Path,
                                                                   pg_url: str) -> None:
    (arg,) = _documented("postgresql")
    assert "USER@HOST/DB" in arg
    done = run_cli(["study.storage=" + pg_url, *_SMALL], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "best: trial" in done.stdout and "Traceback" not in done.stderr


def test_a_sqlite_file_in_a_missing_folder_outside_results_dir_is_one_line(
        tmp_path: Path) -> None:
    from ipu_tune.errors import IpuTuneError
    from ipu_tune.storage import open_storage, resolve_storage

    target = resolve_storage(f"sqlite:///{tmp_path}/nowhere/studies.db", str(tmp_path / "r"))
    with pytest.raises(IpuTuneError) as err:
        open_storage(target)
    msg = str(err.value)
    assert "\n" not in msg and "nowhere" in msg and "does not exist" in msg
    assert not (tmp_path / "nowhere").exists()


def test_a_sqlite_file_below_results_dir_gets_its_folder(tmp_path: Path) -> None:
    from ipu_tune.storage import open_storage, resolve_storage

    results = tmp_path / "results"
    target = resolve_storage(f"sqlite:///{results}/sub/studies.db", str(results))
    open_storage(target)
    assert (results / "sub" / "studies.db").is_file()
