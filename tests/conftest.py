from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pg import pg_bin_dir, postgres_server  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Profiles cache in a per-session directory, shared by subprocesses through the env."""
    if "IPU_TUNE_CACHE_DIR" not in os.environ:
        os.environ["IPU_TUNE_CACHE_DIR"] = str(tmp_path_factory.mktemp("profile_cache"))
    yield


def run_cli(
    args: Sequence[str], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ipu_tune ARGS` in `cwd` as a user would."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ipu_tune", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    if pg_bin_dir() is None:
        pytest.fail("PostgreSQL server binaries are missing: apt-get install postgresql")
    with postgres_server() as url:
        yield url
