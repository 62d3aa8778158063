"""A private PostgreSQL server on loopback, started by the tests themselves (Debian's package).

`initdb` + `pg_ctl` as the `postgres` user (the server refuses root) in a temporary directory,
on a free port; trust authentication on 127.0.0.1 only; stopped at the end of the session.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["pg_bin_dir", "postgres_server"]


def pg_bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@contextmanager
def postgres_server(password: str | None = None) -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh database `ipu_tune` on a private server; with
    `password`, the server asks the user `postgres` for it (scram-sha-256) and the URL holds
    none (give it by PGPASSWORD, ~/.pgpass or the URL)."""
    bin_dir = pg_bin_dir()
    assert bin_dir is not None, "PostgreSQL server binaries missing (apt-get install postgresql)"
    root = Path(tempfile.mkdtemp(prefix="ipu_tune_pg_"))
    data = root / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(data, "postgres")
    port = _free_port()
    run = lambda cmd: subprocess.run(  # noqa: E731
        _as_postgres(cmd), check=True, capture_output=True, text=True, cwd=root
    )
    auth = ["-A", "trust"]
    if password is not None:
        (root / "pw").write_text(password + "\n")
        if os.geteuid() == 0:
            shutil.chown(root / "pw", "postgres")
        auth = ["-A", "scram-sha-256", f"--pwfile={root / 'pw'}"]
    run([str(bin_dir / "initdb"), "-D", str(data), *auth, "-U", "postgres", "--no-sync"])
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-t", "30",
         "-l", str(root / "log"), "start"])
    try:
        subprocess.run(_as_postgres([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port),
                                     "-U", "postgres", "ipu_tune"]), check=True,
                       capture_output=True, text=True, cwd=root,
                       env={**os.environ, "PGPASSWORD": password or ""})
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/ipu_tune"
    finally:
        subprocess.run(_as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                                     "stop"]), capture_output=True, cwd=root)
        shutil.rmtree(root, ignore_errors=True)
