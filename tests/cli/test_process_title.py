"""A storage URL's password stays out of the process titles (`ps`, /proc/PID/cmdline) of the
command and its forked workers; libpq's PGPASSWORD and ~/.pgpass give it without a URL
password at all (SQLAlchemy and psycopg read them)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._pg import pg_bin_dir, postgres_server
from tests.conftest import REPO, run_cli

_SECRET = "Hunter2Secret"
_RUN = ["study.n_trials=40", "study.workers=2", "study.progress_bar=false", "model=mnist_cnn"]


@pytest.fixture(scope="module")
def pw_url() -> Iterator[str]:
    """A server that asks for the password: postgresql+psycopg://postgres@HOST:PORT/ipu_tune."""
    if pg_bin_dir() is None:
        pytest.fail("PostgreSQL server binaries are missing: apt-get install postgresql")
    with postgres_server(password=_SECRET) as url:
        yield url.replace("+psycopg2", "+psycopg")


def _titles(pid: int) -> list[tuple[int, str]]:
    """The command lines of `pid` and its descendants, with their PIDs."""
    out = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            out.append((p, Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # ended meanwhile
            continue
    return out


def test_the_password_is_masked_in_the_titles_of_the_command_and_its_workers(
        pw_url: str, tmp_path: Path) -> None:
    """Masked from the first lines of Python on (the kernel shows the command as typed until
    then), in the parent and in every forked worker for the whole run."""
    url = pw_url.replace("postgres@", f"postgres:{_SECRET}@")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ipu_tune", f"study.storage={url}", *_RUN], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    seen: list[tuple[float, int, str]] = []
    started = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - started < 120:
            now = time.monotonic() - started
            seen += [(now, pid, title) for pid, title in _titles(proc.pid)]
            time.sleep(0.1 if now > 3 else 0.01)
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    masked = [t for t in seen if "postgres:***@" in t[2]]
    assert masked, seen[:3]
    assert masked[0][0] < 1.0  # before the command's imports, well before the study opens
    assert {pid for _, pid, _ in masked} - {proc.pid}  # forked workers seen, masked
    leaks = [t for t in seen if _SECRET in t[2]]
    assert all(pid == proc.pid and when < masked[0][0] for when, pid, _ in leaks), leaks
    assert _SECRET not in out + err


def test_pgpassword_and_pgpass_give_the_password_without_the_url(pw_url: str,
                                                                  tmp_path: Path) -> None:
    run = [f"study.storage={pw_url}", "study.n_trials=2", "study.progress_bar=false",
           "model=mnist_cnn", "study.name=pw"]
    refused = run_cli(run, cwd=tmp_path, env={"PGPASSWORD": "", "PGPASSFILE": "/nonexistent"})
    assert refused.returncode == 2 and "password" in refused.stderr.lower(), refused.stderr
    assert run_cli(run, cwd=tmp_path, env={"PGPASSWORD": _SECRET}).returncode == 0
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:*:*:postgres:{_SECRET}\n")
    pgpass.chmod(0o600)
    listed = run_cli(["studies", "--storage", pw_url], cwd=tmp_path,
                     env={"PGPASSWORD": "", "PGPASSFILE": str(pgpass)})
    assert listed.returncode == 0 and "pw" in listed.stdout, listed.stderr
