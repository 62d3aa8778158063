from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import open_storage, redact, resolve_storage


def test_default_is_a_journal_under_results_dir(tmp_path: Path) -> None:
    t = resolve_storage(None, str(tmp_path / "res"))
    assert t.kind == "journal"
    assert t.location == str(tmp_path / "res" / "ipu_tune.journal")
    assert t.results_url == "sqlite:///" + str(tmp_path / "res" / "results.db")


def test_journal_path_and_urls(tmp_path: Path) -> None:
    assert resolve_storage(str(tmp_path / "a.journal"), "results").kind == "journal"
    assert resolve_storage("journal:///x/y.log", "results").location == "/x/y.log"
    t = resolve_storage("sqlite:///" + str(tmp_path / "s.db"), "results")
    assert (t.kind, t.results_url) == ("rdb", "sqlite:///" + str(tmp_path / "s.db"))


def test_redact_hides_password() -> None:
    url = "postgresql://alice:s3cret@db.example:5432/studies"
    assert "s3cret" not in redact(url)
    assert "alice" in redact(url)
    assert "s3cret" not in resolve_storage(url, "results").display


def test_journal_storage_survives_reopen(tmp_path: Path) -> None:
    t = resolve_storage(None, str(tmp_path))
    s = optuna.create_study(study_name="a", storage=open_storage(t))
    s.optimize(lambda tr: tr.suggest_float("x", 0, 1), n_trials=3)
    again = optuna.load_study(study_name="a", storage=open_storage(t))
    assert len(again.trials) == 3


def test_corrupted_sqlite_file_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "broken.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(IpuTuneError) as err:
        open_storage(resolve_storage(f"sqlite:///{db}", "results"))
    assert "\n" not in str(err.value) and "broken.db" in str(err.value)


def test_corrupted_journal_is_one_line(tmp_path: Path) -> None:
    j = tmp_path / "ipu_tune.journal"
    j.write_text('{"op_code": 0, "worker_id": "x"\nnot json at all\n')
    with pytest.raises(IpuTuneError) as err:
        storage = open_storage(resolve_storage(None, str(tmp_path)))
        optuna.get_all_study_summaries(storage)
    assert "\n" not in str(err.value)


def test_unreachable_postgres_is_one_line_without_password() -> None:
    url = "postgresql+psycopg2://bob:hunter2@127.0.0.1:1/none"
    with pytest.raises(IpuTuneError) as err:
        open_storage(resolve_storage(url, "results"))
    msg = str(err.value)
    assert "\n" not in msg and "hunter2" not in msg and "127.0.0.1" in msg


def test_unwritable_results_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(IpuTuneError) as err:
        open_storage(resolve_storage(None, str(blocker / "sub")))
    assert "results_dir" in str(err.value) and "\n" not in str(err.value)


def test_a_relative_sqlite_url_that_climbs_above_the_root_opens_the_file_the_os_finds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite reads `..` by the letters and cannot open a path that climbs above /, which the
    OS reads as / itself: before, the database and its lock file were made, then "cannot open
    (unable to open database file)"."""
    monkeypatch.chdir(tmp_path)
    ups = "../" * len(tmp_path.parts)  # one more than the folders below /
    url = f"sqlite:///{ups}{str(tmp_path).lstrip('/')}/rel.db"
    target = resolve_storage(url, str(tmp_path / "res"))
    s = optuna.create_study(study_name="a", storage=open_storage(target))
    s.optimize(lambda tr: tr.suggest_float("x", 0, 1), n_trials=2)
    assert (tmp_path / "rel.db").is_file() and target.display == url
    from ipu_tune.storage import ResultsStore

    ResultsStore(target.results_url).close()  # the results table: the same file


def test_a_failed_open_of_a_new_sqlite_file_leaves_no_file(tmp_path: Path) -> None:
    """A SQLite path over SQLite's 512 bytes is refused before the lock file is made."""
    long = tmp_path / ("d" * 250) / ("e" * 250)
    long.mkdir(parents=True)
    with pytest.raises(IpuTuneError) as err:
        open_storage(resolve_storage(f"sqlite:///{long}/s.db", "results"))
    assert "allowed: at most 512 (SQLite's limit)" in str(err.value), err.value
    assert list(long.iterdir()) == []
