"""A journal whose last line is no record but ends in a newline (NUL bytes after a machine
crash, garbage, a torn record followed by a newline): Optuna reads past it, so the next append
put it in the middle and the read after that failed with a traceback. The tuner moves it aside
before anything appends; the commands that only read never change the journal and read past it
(and past bad lines in the middle), with one line on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import open_storage, resolve_storage
from tests.conftest import REPO

BAD_TAILS = [b"\x00\x00\x00\n", b"GARBAGE{{{\n", b'{"op_code":4,"worker_id":"ab\n',
             b"\n"]
IDS = ["NUL bytes", "garbage", "a torn record", "an empty line"]


def _journal(tmp_path: Path, tail: bytes, trials: int = 3) -> Path:
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="a", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=trials)
    journal = Path(target.location)
    with journal.open("ab") as f:
        f.write(tail)
    return journal


@pytest.mark.parametrize("tail", BAD_TAILS, ids=IDS)
def test_the_tuner_moves_a_bad_last_line_aside_before_it_appends(
        tail: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = _journal(tmp_path, tail)
    capsys.readouterr()
    storage = open_storage(resolve_storage(None, str(tmp_path)))
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no journal record" in err and ".bad-" in err
    backups = list(tmp_path.glob("ipu_tune.journal.bad-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == tail
    study = optuna.create_study(study_name="a", storage=storage, load_if_exists=True)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)  # appends, then reads
    reread = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    assert len(optuna.load_study(study_name="a", storage=reread).trials) == 4
    lines = journal.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(line.startswith(b'{"op_code"') for line in lines[:-1])


@pytest.mark.parametrize("tail", BAD_TAILS, ids=IDS)
@pytest.mark.parametrize("where", ["last", "in the middle"])
def test_reading_never_changes_the_journal_and_reads_past_bad_lines(
        tail: bytes, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = _journal(tmp_path, b"" if where == "in the middle" else tail)
    if where == "in the middle":
        lines = journal.read_bytes().split(b"\n")
        lines.insert(2, tail.rstrip(b"\n"))
        journal.write_bytes(b"\n".join(lines))
    before = sorted(tmp_path.iterdir()), journal.read_bytes(), journal.stat().st_mtime_ns
    (tmp_path / "ipu_tune.journal.ipu_tune-lock").unlink(missing_ok=True)
    before = sorted(tmp_path.iterdir()), *before[1:]
    capsys.readouterr()
    storage = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    assert len(optuna.load_study(study_name="a", storage=storage).trials) == 3
    assert [s.study_name for s in optuna.get_all_study_summaries(storage, False)] == ["a"]
    assert (sorted(tmp_path.iterdir()), journal.read_bytes(),
            journal.stat().st_mtime_ns) == before  # no repair, no lock file
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "1 line(s) that are no journal record" in err
    assert "tuner moves them aside" in err
    with pytest.raises(IpuTuneError, match="opened to be read only"):
        optuna.create_study(study_name="b", storage=storage)
    assert journal.read_bytes() == before[1]


def test_a_torn_tail_is_reported_as_the_tuner_reports_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A garbage line in the middle and a torn last record: the reading commands said only
    "1 line(s)", the tuner both; now one line says both, in the tuner's words."""
    journal = _journal(tmp_path, b"")
    lines = journal.read_bytes().split(b"\n")
    lines.insert(2, b"GARBAGE")
    torn = b'{"op_code":4,"wor'
    journal.write_bytes(b"\n".join(lines) + torn)
    before = journal.read_bytes()
    capsys.readouterr()
    storage = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    assert len(optuna.load_study(study_name="a", storage=storage).trials) == 3
    read = capsys.readouterr().err.strip()
    assert journal.read_bytes() == before
    said = ("1 line(s) that are no journal record and a torn last record (17 bytes: a writer "
            "killed mid-write, or a full disk)")
    assert read.count("\n") == 0 and f"holds {said}; read past them" in read, read
    open_storage(resolve_storage(None, str(tmp_path)))  # the tuner's open repairs
    assert f"held {said}; moved them to" in capsys.readouterr().err


def test_a_tail_being_appended_is_read_without_a_word(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A tail without its newline may be another process's append in progress: when the file
    grows while it is judged, it is no torn record; once whole, its record is read."""
    import ipu_tune.storage._reading as reading

    journal = _journal(tmp_path, b"", trials=2)
    lines = journal.read_bytes().split(b"\n")[:-1]
    rest = b"".join(line + b"\n" for line in lines[-4:])  # the last trial's records
    whole = b"".join(line + b"\n" for line in lines[:-4])
    journal.write_bytes(whole + rest[:10])

    def finish(_: float) -> None:  # the writer ends its append while the reader waits
        journal.write_bytes(whole + rest[:-1])

    monkeypatch.setattr(reading.time, "sleep", finish)
    capsys.readouterr()
    storage = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    study = optuna.load_study(study_name="a", storage=storage)
    assert capsys.readouterr().err == ""
    # The last record, whole but for its newline, is read, as the repair keeps it.
    assert study.trials[-1].state == optuna.trial.TrialState.COMPLETE
    assert len(study.trials) == 2


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ipu_tune", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_nul_tail_neither_breaks_a_run_nor_is_touched_by_studies(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = ("model=mnist_cnn", "study.name=s", f"results_dir={results}",
           "study.progress_bar=false")
    assert _cli(*run, "study.n_trials=2", cwd=tmp_path).returncode == 0
    journal = results / "ipu_tune.journal"
    with journal.open("ab") as f:
        f.write(b"\x00" * 512 + b"\n")
    before = journal.read_bytes()
    listed = _cli("studies", "--results-dir", str(results), cwd=tmp_path)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert journal.read_bytes() == before and not list(results.glob("*.bad-*"))
    for n_trials in (3, 4):  # the second run reads what the first appended after the tail
        proc = _cli(*run, f"study.n_trials={n_trials}", cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert len(list(results.glob("ipu_tune.journal.bad-*"))) == 1


def test_a_fused_line_is_repaired_and_the_whole_record_in_it_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A torn record with the next append fused onto it (one line, two record starts, the ends
    of a record at both ends): readers read its whole record, the tuner keeps that record in
    place and moves the torn bytes aside, and plain Optuna reads the study again."""
    journal = _journal(tmp_path, b"", trials=4)
    lines = journal.read_bytes().split(b"\n")[:-1]
    k = len(lines) // 2
    torn = lines[k][: len(lines[k]) // 2]
    fused = [*lines[:k], torn + lines[k + 1], *lines[k + 2:]]
    journal.write_bytes(b"".join(line + b"\n" for line in fused))
    with pytest.raises(ValueError):
        optuna.load_study(study_name="a", storage=optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(journal))))
    capsys.readouterr()
    reread = open_storage(resolve_storage(None, str(tmp_path)), read_only=True)
    seen = optuna.load_study(study_name="a", storage=reread).trials
    assert "no journal record" in capsys.readouterr().err
    open_storage(resolve_storage(None, str(tmp_path)))  # the tuner's open repairs
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and ".bad-" in err
    (backup,) = tmp_path.glob("ipu_tune.journal.bad-*")
    assert backup.read_bytes() == torn + b"\n"
    assert journal.read_bytes() == b"".join(
        line + b"\n" for line in [*lines[:k], *lines[k + 1:]])
    plain = optuna.load_study(study_name="a", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    assert [(t.number, t.state, t.params) for t in plain.trials] == [
        (t.number, t.state, t.params) for t in seen]


def test_an_unreadable_default_journal_is_named_as_results_dirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal Optuna cannot read and the repair finds nothing in: the line names the key
    with its own value (the folder), then the journal file."""
    from ipu_tune.storage import _open

    journal = _journal(tmp_path, b"")

    def unreadable(path: Path) -> None:
        raise ValueError("Invalid log format.")

    monkeypatch.setattr(_open, "_journal", unreadable)
    with pytest.raises(IpuTuneError) as err:
        open_storage(resolve_storage(None, str(tmp_path)))
    assert str(err.value).startswith(
        f"results_dir={str(tmp_path)!r}: its journal {str(journal)!r}: cannot read the journal "
        "file (ValueError: Invalid log format.)")
