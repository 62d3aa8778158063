"""A `results.db` SQLite reports damaged in any way is moved aside and rebuilt from the studies,
with one line, as one whose header was overwritten always was. Before, only SQLite's "file is
not a database" took that path: a file cut short or overwritten past its header ("database
disk image is malformed", on opening it or on a query that reads a damaged page later) ended
every run with `results store ...: cannot open (...)` (exit 2) or a read's or write's line.

Each test damages a real SQLite file as the disk or a user would: cut short, overwritten past
the 100-byte header, or one page overwritten that the open does not read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.records import TrialRecord
from ipu_tune.results import append_trials, sync_results
from ipu_tune.storage import ResultsStore

# Long names spread the unique index (study, trial_number) over many pages.
NAME = "z" * 400
OTHER = "a" * 400
_LEAF_TABLE, _LEAF_INDEX = 0x0D, 0x0A  # SQLite's b-tree page types


def _study(name: str, n: int, skip: int | None = None) -> optuna.Study:
    study = optuna.create_study(study_name=name, direction="maximize")
    for i in range(n):
        t = study.ask()
        TrialRecord.write_plan(t, {
            "model": {"name": "resnet101"}, "workload": {"mode": "train"},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"gradient_accumulation": t.suggest_int("ga", 1, 64)},
        }, {"fits": True, "throughput": float(i), "memory_per_ipu": [10, 20 + i],
            "bottleneck": "compute", "reason": "x" * 300})
        t.set_user_attr("constraints", [-1.0])
        study.tell(t, float(i))
    return study


def _table(db: Path, *studies: optuna.Study, skip: int | None = None) -> None:
    """A sound results table of `studies` (without trial `skip` of the first), closed."""
    store = ResultsStore(f"sqlite:///{db}")
    for i, study in enumerate(studies):
        trials = [t for t in study.trials if i or t.number != skip]
        append_trials(store, study.study_name, trials)
    store.close()
    assert not [p for p in db.parent.iterdir() if p.name != db.name]  # no WAL left


def _pages(db: Path, kind: int, holding: bytes = b"", without: bytes = b"") -> list[int]:
    """Offsets of the pages of `kind` (page 1, the schema, never) holding `holding` and not
    `without`."""
    data = db.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    return [at for at in range(size, len(data), size) if data[at] == kind
            and holding in data[at:at + size] and not (without and without in data[at:at + size])]


def _overwrite(db: Path, offsets: list[int]) -> None:
    size = int.from_bytes(db.read_bytes()[16:18], "big")
    with db.open("r+b") as f:
        for at in offsets:
            f.seek(at)
            f.write(b"\xff" * size)


def _cut_short(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 2)


def _past_the_header(db: Path) -> None:  # the header (100 bytes) kept, the schema page lost
    with db.open("r+b") as f:
        f.seek(100)
        f.write(os.urandom(3900))


def _inside_the_header(db: Path) -> None:  # shorter than SQLite's header
    os.truncate(db, 50)


def _one_line(tmp_path: Path, err: str) -> Path:
    """The one `.bad-` file, named by the one line on stderr."""
    aside = [p for p in tmp_path.iterdir() if ".bad-" in p.name and p.name.startswith(
        "results.db.bad-") and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1, aside
    assert err.count("\n") == 1 and err.startswith("ipu-tune: results table "), err
    assert f"is damaged (database disk image is malformed); moved it to {str(aside[0])!r}" in err
    return aside[0]


@pytest.mark.parametrize("damage", [_cut_short, _past_the_header, _inside_the_header])
def test_a_results_file_damaged_past_its_header_is_moved_aside_and_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        damage: Callable[[Path], None]) -> None:
    db = tmp_path / "results.db"
    study = _study(NAME, 30)
    _table(db, study)
    damage(db)
    before = db.read_bytes()
    store = ResultsStore(f"sqlite:///{db}")
    try:
        assert sync_results(store, study) == 30
        assert [r["trial_number"] for r in store.rows(NAME)] == list(range(30))
    finally:
        store.close()
    assert _one_line(tmp_path, capsys.readouterr().err).read_bytes() == before  # kept whole


def test_a_damaged_page_a_read_finds_after_the_open_is_moved_aside_and_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The open reads the schema, the index and the table's last page: a page of rows in the
    middle is first read by the query of every row (`report`, `export`, the exports)."""
    db = tmp_path / "results.db"
    study = _study(NAME, 60)
    _table(db, study)
    leaves = _pages(db, _LEAF_TABLE)
    assert len(leaves) >= 3, leaves
    _overwrite(db, [leaves[len(leaves) // 2]])
    store = ResultsStore(f"sqlite:///{db}")
    try:
        assert sync_results(store, study) == 0  # the index is whole: no row missing
        assert capsys.readouterr().err == ""  # nothing found damaged yet
        assert [r["trial_number"] for r in store.rows(NAME)] == list(range(60))  # refilled
    finally:
        store.close()
    _one_line(tmp_path, capsys.readouterr().err)


def test_a_damaged_page_a_write_finds_is_moved_aside_and_rebuilt(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A worker's insert of its finished trial reads the index page where its row goes: when
    that page is damaged, the row is written to a table made anew, and the run's sync at its
    end puts the others back."""
    db = tmp_path / "results.db"
    study, other = _study(NAME, 60), _study(OTHER, 20)
    _table(db, study, other, skip=30)
    # Every index page of NAME's rows alone: the open's probe row ("ipu-tune probe") goes
    # between OTHER's and NAME's, on a page it shares with OTHER's rows.
    damaged = _pages(db, _LEAF_INDEX, holding=NAME.encode(), without=OTHER.encode())
    assert damaged, "the index should span pages of NAME's rows alone"
    _overwrite(db, damaged)
    store = ResultsStore(f"sqlite:///{db}")
    try:
        append_trials(store, NAME, [study.trials[30]])
        assert [r["trial_number"] for r in store.rows(NAME)] == [30]
        _one_line(tmp_path, capsys.readouterr().err)
        assert sync_results(store, study) == 59
        assert len(store.rows(NAME)) == 60
    finally:
        store.close()


def test_a_damaged_results_table_in_a_study_database_is_one_line_and_left_alone(
        tmp_path: Path) -> None:
    """A study database (a SQLite storage holds the results table too) is never moved: its
    studies are in it. The line says it is damaged and what to do."""
    db = tmp_path / "studies.db"
    study = _study(NAME, 60)
    _table(db, study)
    leaves = _pages(db, _LEAF_TABLE)
    _overwrite(db, [leaves[len(leaves) // 2]])
    store = ResultsStore(f"sqlite:///{db}")
    try:
        with pytest.raises(IpuTuneError) as err:
            store.rows(NAME)
    finally:
        store.close()
    assert "database disk image is malformed" in str(err.value)
    assert "sqlite3 FILE .recover" in str(err.value) and not err.value.fault
    assert sorted(p.name for p in tmp_path.iterdir()) == ["studies.db"]


def test_a_store_whose_file_another_process_moved_aside_writes_to_the_new_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A worker's store still open on the file another process moved aside: its next row goes
    to the table everyone reads, not to the `.bad-` file."""
    db = tmp_path / "results.db"
    study = _study(NAME, 60)
    _table(db, study)
    worker = ResultsStore(f"sqlite:///{db}")
    try:
        leaves = _pages(db, _LEAF_TABLE)
        _overwrite(db, [leaves[len(leaves) // 2]])
        mover = ResultsStore(f"sqlite:///{db}")
        try:
            sync_results(mover, study)
            assert len(mover.rows(NAME)) == 60  # moved aside and rebuilt
            _one_line(tmp_path, capsys.readouterr().err)
            later = _study(OTHER, 1)
            append_trials(worker, OTHER, later.trials)
            assert [r["study"] for r in mover.rows(OTHER)] == [OTHER]
        finally:
            mover.close()
    finally:
        worker.close()


def test_two_files_moved_aside_in_one_second_are_both_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `.bad-` name holds the second and the process: a second damaged file moved aside by
    the same process in that second replaced the first (the rename replaces its target)."""
    import ipu_tune.storage._results_store as results_store

    monkeypatch.setattr(results_store.time, "strftime", lambda *_: "20250101T000000Z")
    sound = tmp_path / "sound" / "results.db"
    sound.parent.mkdir()
    _table(sound, _study(NAME, 5))
    db = tmp_path / "results.db"
    kept = []
    for _ in range(2):
        db.write_bytes(sound.read_bytes())
        _past_the_header(db)
        kept.append(db.read_bytes())
        ResultsStore(f"sqlite:///{db}").close()
        db.unlink()
    aside = sorted((p for p in tmp_path.iterdir() if ".bad-" in p.name), key=lambda p: len(p.name))
    assert [p.read_bytes() for p in aside] == kept, aside
