"""Journals recognised before they are touched, bad records moved aside, claims keyed by study,
locks that name their holder instead of hanging, and redaction of every password form."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import ClaimLock, FlockLock, open_storage, redact, resolve_storage


def _journal(tmp_path: Path, trials: int = 3) -> Path:
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="a", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=trials)
    return Path(target.location)


def _plain_optuna_trials(journal: Path) -> int:
    storage = JournalStorage(JournalFileBackend(str(journal)))
    return len(optuna.load_study(study_name="a", storage=storage).trials)


def _not_a_journal(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "other.journal"
    if kind == "sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
    elif kind == "log without final newline":
        path.write_text("2024-01-01 started\nline two without a newline")
    elif kind == "symlinked text":
        (tmp_path / "notes.txt").write_text("my notes\nkeep me")
        path.symlink_to(tmp_path / "notes.txt")
    elif kind == "json but not a journal":
        path.write_text('{"name": "x"}\n{"name": "y"}')
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["sqlite", "log without final newline", "symlinked text",
                                  "json but not a journal", "fifo", "folder"])
def test_a_file_that_is_no_journal_is_refused_and_left_unchanged(
        kind: str, tmp_path: Path) -> None:
    path = _not_a_journal(tmp_path, kind)
    before = path.read_bytes() if path.is_file() else None
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(IpuTuneError, match=r"^study\.storage=.*(not an Optuna journal|not a "
                                           r"regular file)"):
        open_storage(resolve_storage(str(path), str(tmp_path)))
    assert (path.read_bytes() if path.is_file() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no lock, no backup


@pytest.mark.parametrize(("case", "line"), [
    ("garbage", b"this is garbage"),
    ("empty line", b""),
    ("unknown op code", b'{"op_code":99,"worker_id":"w"}'),
    ("NUL bytes", b"\x00\x00\x00\x00"),
    ("a JSON list", b"[1, 2, 3]"),
    ("a record without a worker", b'{"op_code":4}'),
])
def test_a_bad_line_in_the_middle_is_moved_aside_and_the_study_stays_readable(
        case: str, line: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = _journal(tmp_path)
    lines = journal.read_bytes().split(b"\n")
    lines.insert(3, line)
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(Exception):  # noqa: B017 - what plain Optuna does with such a file
        _plain_optuna_trials(journal)
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    assert len(optuna.load_study(study_name="a", storage=storage).trials) == 3, case
    assert _plain_optuna_trials(journal) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no journal record" in err and ".bad-" in err
    backups = list(tmp_path.glob("ipu_tune.journal.bad-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == line + b"\n"


def test_bad_lines_and_a_torn_tail_together_keep_every_trial(tmp_path: Path) -> None:
    journal = _journal(tmp_path, trials=4)
    lines = journal.read_bytes().rstrip(b"\n").split(b"\n")
    lines[2:2] = [b"junk", b""]
    journal.write_bytes(b"\n".join(lines) + b'\n{"op_code":4,"wor')
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    study = optuna.load_study(study_name="a", storage=storage)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert _plain_optuna_trials(journal) == 5


def test_a_sound_journal_is_not_rewritten(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    before = (journal.read_bytes(), journal.stat().st_mtime_ns)
    open_storage(resolve_storage(None, str(tmp_path)))
    assert (journal.read_bytes(), journal.stat().st_mtime_ns) == before
    assert not list(tmp_path.glob("*.bad-*")) and not list(tmp_path.glob("*.torn-*"))


def test_claims_of_another_study_with_the_same_trial_number_are_not_ours(
        tmp_path: Path) -> None:
    claims = ClaimLock(str(tmp_path / "s.claims"))
    ours = claims.running_file("w-ours")
    ours.hold(7, "study-a")
    theirs = claims.running_file("w-theirs")
    theirs.hold(7, "study-b")
    live_a = claims.held("study-a").live
    live_b = claims.held("study-b").live
    assert live_a == {7: "w-ours"} and live_b == {7: "w-theirs"}
    ours.close()
    assert claims.held("study-a")[0] == {}  # study-b's live worker does not keep it running
    theirs.close()


@pytest.mark.parametrize("thing", ["fifo", "folder", "symlink to a fifo"])
def test_strange_entries_in_the_claims_folder_do_not_hang(thing: str, tmp_path: Path) -> None:
    claims = ClaimLock(str(tmp_path / "s.claims"))
    running = tmp_path / "s.claims.running"
    running.mkdir()
    if thing == "fifo":
        os.mkfifo(running / "x")
    elif thing == "folder":
        (running / "x").mkdir()
    else:
        os.mkfifo(tmp_path / "f")
        (running / "x").symlink_to(tmp_path / "f")
    start = time.monotonic()
    with claims.recovering():
        assert claims.held("s") == ({}, {}, [])
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("thing", ["a folder as the claims file", "a file as the claims folder",
                                   "a fifo as the claims file"])
def test_a_wrong_thing_where_a_claims_path_belongs_is_one_line(thing: str, tmp_path: Path) -> None:
    claims = ClaimLock(str(tmp_path / "s.claims"))
    if thing == "a folder as the claims file":
        (tmp_path / "s.claims").mkdir()
    elif thing == "a fifo as the claims file":
        os.mkfifo(tmp_path / "s.claims")
    else:
        (tmp_path / "s.claims.running").write_text("x")
    with pytest.raises(IpuTuneError, match=r"claim(s folder| lock) .*s\.claims"), \
            claims.claiming():
        claims.running_file("w").close()


_HOLD = """
import sys, time
from ipu_tune.storage import FlockLock
lock = FlockLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_stopped_lock_holder_is_named_within_seconds(tmp_path: Path) -> None:
    journal = str(tmp_path / "x.journal")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, journal], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(IpuTuneError, match=rf"held by process {holder.pid}, stopped"):
            FlockLock(journal).acquire()
        assert time.monotonic() - start < 10
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    lock = FlockLock(journal)  # the kernel dropped the dead holder's lock
    assert lock.acquire()
    lock.release()


@pytest.mark.parametrize("url", [
    "postgresql://bob:b0b/SECRETPW@host/db",
    "postgresql://bob:SECRET@PW@host:5432/db",
    "postgresql://u:SECRETPW!x@@",
    "LexerNoViableAltException: study.storage=postgresql://u:SECRETPW!x@h/db",
    "study.storage=postgresql//u:SECRETPW@host/db",
    "postgresql+psycopg2://u:SEC:RETPW@h/db?sslpassword=SECRETPW&application_name=x",
])
def test_redact_hides_passwords_with_slash_at_and_bang(url: str) -> None:
    out = redact(url)
    assert "SECRET" not in out and "PW" not in out.replace("postgresql", ""), out
    assert "***" in out


@pytest.mark.parametrize("url", [
    "postgresql://u:SEC RETPW@h/db",
    "postgresql://u:SEC\tRETPW@h/db",
    "postgresql://u:SEC RET/PW@h:5432/db?application_name=x",
])
def test_a_storage_url_whose_password_holds_whitespace_is_shown_without_it(url: str) -> None:
    target = resolve_storage(url, "results")
    shown = target.display
    assert "SEC" not in shown and "RET" not in shown and "***" in shown, shown
    with pytest.raises(IpuTuneError) as err:  # the error line of a server that cannot be reached
        open_storage(resolve_storage(url.replace("@h", "@127.0.0.1:9"), "results"))
    assert "SEC" not in str(err.value) and "RET" not in str(err.value), str(err.value)


def test_postgresql_study_locks_are_per_study_and_name_a_holder_that_stays(pg_url: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(pg_url)
    a = ClaimLock(None, pg_url, timeout_s=1.0)
    with a.recovering("study-a"):
        start = time.monotonic()
        with ClaimLock(None, pg_url, timeout_s=30.0).recovering("study-b"):
            assert time.monotonic() - start < 5  # another study does not wait
        late = ClaimLock(None, pg_url, timeout_s=1.0)
        with pytest.raises(IpuTuneError, match=r"study 'study-a': its lock .* held by server "
                                               r"process \d+"), late.recovering("study-a"):
            pass
    with ClaimLock(None, pg_url, timeout_s=1.0).recovering("study-a"):
        pass  # released with its holder
    engine.dispose()


def test_a_torn_tail_longer_than_the_read_chunk_is_judged_whole(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    sound = journal.read_bytes()
    journal.write_bytes(sound + b'{"op_code":8,"worker_id":"w","user_attr":"' + b"x" * 600_000)
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    assert len(optuna.load_study(study_name="a", storage=storage).trials) == 3
    assert journal.read_bytes() == sound
