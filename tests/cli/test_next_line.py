"""The summary's `next:` line runs as printed: a storage's password is left out of it (masked,
it would be sent as `***`), never shown, and said where libpq finds it."""

from __future__ import annotations

import shlex

import pytest

from ipu_tune.cli._summary import _next_line
from ipu_tune.storage import StorageTarget
from ipu_tune.tuner import RunSummary

_SECRET = "s3cr3tPassw0rd"


def _summary(url: str, n_complete: int) -> RunSummary:
    display = StorageTarget("rdb", url, "", "results").display  # as the tuner stores it
    return RunSummary(study_name="mnist_cnn-mk2x2-throughput", storage=display,
                      n_complete=n_complete, ran_here=n_complete, retried=(),
                      best_trial=None, best_config=None, best_result=None)


@pytest.mark.parametrize("n_complete", [0, 3])
@pytest.mark.parametrize(("url", "runnable"), [
    (f"postgresql://alice:{_SECRET}@127.0.0.1:54329/ipt",
     "postgresql://alice@127.0.0.1:54329/ipt"),
    (f"postgresql+psycopg://alice@db.example/ipt?sslmode=require&password={_SECRET}",
     "postgresql+psycopg://alice@db.example/ipt?sslmode=require"),
])
def test_a_storage_password_is_left_out_of_the_next_line(
        url: str, runnable: str, n_complete: int) -> None:
    line = _next_line(_summary(url, n_complete))
    assert _SECRET not in line and "***" not in line, line
    commands = [c for c in line.removeprefix("next: ").split("; ") if c.startswith("python")]
    assert commands
    for command in commands:
        args = shlex.split(command)
        assert args[args.index("--storage") + 1] == runnable, line
    assert line.endswith("; the storage's password is left out: libpq reads it from "
                         "PGPASSWORD or ~/.pgpass"), line


def test_a_storage_without_a_password_gets_no_note() -> None:
    line = _next_line(_summary("postgresql://alice@127.0.0.1:54329/ipt", 3))
    assert "--storage postgresql://alice@127.0.0.1:54329/ipt " in line
    assert "PGPASSWORD" not in line


def test_another_databases_password_is_not_said_to_come_from_libpq() -> None:
    line = _next_line(_summary(f"mysql+pymysql://bob:{_SECRET}@db.example/ipt", 3))
    assert _SECRET not in line and "--storage mysql+pymysql://bob@db.example/ipt " in line
    assert "PGPASSWORD" not in line
    assert line.endswith("give it as your database driver reads it outside the URL"), line
