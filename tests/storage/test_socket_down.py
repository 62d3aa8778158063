"""A PostgreSQL server that is down is a fault (exit 1, run again once it is reachable)
whether it is reached by TCP or by a Unix socket, whose missing socket file says "No such
file or directory" and puts libpq's "Is the server running" on its second line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.errors import IpuTuneError, server_fault, unreachable
from ipu_tune.storage import open_storage, resolve_storage


@pytest.mark.parametrize("driver", ["postgresql", "postgresql+psycopg2", "postgresql+psycopg"])
def test_a_server_down_behind_a_unix_socket_is_a_fault(driver: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg2" if driver.endswith("psycopg2") or driver == "postgresql"
                        else "psycopg")
    url = f"{driver}://bob@/db?host={tmp_path}"  # no server listens in tmp_path
    with pytest.raises(IpuTuneError) as info:
        open_storage(resolve_storage(url, str(tmp_path / "results")))
    assert info.value.fault, str(info.value)
    assert "run the same command again once the server is reachable" in str(info.value)
    assert "No such file or directory" in str(info.value)


def test_the_server_answering_no_stays_bad_input() -> None:
    refused = ('connection to server at "127.0.0.1", port 5432 failed: FATAL:  password '
               'authentication failed for user "bob"')
    assert not unreachable(refused)
    assert unreachable('connection to server on socket "/x/.s.PGSQL.5432" failed: No such '
                       'file or directory\n\tIs the server running locally and accepting '
                       'connections on that socket?')
    # A trial's text in SQLAlchemy's [SQL: ...] parameters is not the driver's words.
    assert not unreachable("database is locked\n[SQL: INSERT ...]\n[parameters: ('is the "
                           "server running',)]")


def test_a_lost_socket_under_a_run_is_the_server_stopping() -> None:
    class OperationalError(Exception):
        pass

    exc = OperationalError('connection to server on socket "/x/.s.PGSQL.5432" failed: No '
                           'such file or directory\n\tIs the server running locally?')
    assert server_fault(exc) is not None
