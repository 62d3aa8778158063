"""The results table of a journal lives in results_dir: `results.db` for the default journal,
`results@<tag>.db` (the storage's export tag) for any other. A journal outside results_dir
never gets a table beside it: a `results.db` there, the user's text or another app's SQLite
database, is neither renamed nor written into."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ipu_tune._own_files import reserved_study_name, storage_file
from ipu_tune.config import CONF_DIR, TuneConfig
from ipu_tune.config._load import typed
from ipu_tune.storage import ResultsStore, resolve_storage
from ipu_tune.tuner import run


def _cfg(results: Path, *extra: str) -> TuneConfig:
    overrides = [f"results_dir={results}", "study.n_trials=3", "study.progress_bar=false",
                 "model=mnist_cnn", "study.name=s", *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=overrides))


def _rows(table: Path) -> list[int]:
    store = ResultsStore(f"sqlite:///{table}")
    try:
        return sorted(r["trial_number"] for r in store.rows("s"))
    finally:
        store.close()


@pytest.mark.parametrize("theirs", ["text", "another app's SQLite database"])
def test_a_journal_outside_results_dir_keeps_its_table_in_results_dir(
        theirs: str, tmp_path: Path) -> None:
    elsewhere, results = tmp_path / "elsewhere", tmp_path / "results"
    elsewhere.mkdir()
    mine = elsewhere / "results.db"
    if theirs == "text":
        mine.write_text("my data\n")
    else:
        with sqlite3.connect(mine) as conn:
            conn.execute("CREATE TABLE notes (t TEXT)")
    before = mine.read_bytes()
    journal = elsewhere / "j.journal"
    run(_cfg(results, f"study.storage={journal}"))
    assert mine.read_bytes() == before
    assert sorted(p.name for p in elsewhere.iterdir() if p.name.startswith("results")) == [
        "results.db"]
    target = resolve_storage(str(journal), str(results))
    table = results / f"results@{target.export_tag}.db"
    assert target.results_url == f"sqlite:///{table}"
    assert _rows(table) == [0, 1, 2]
    assert not (results / "results.db").exists()  # the default journal's, not made


def test_two_journals_studies_of_one_name_keep_their_own_rows(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run(_cfg(results))
    other = results / "other.journal"
    run(_cfg(results, f"study.storage={other}", "study.n_trials=5"))
    tag = resolve_storage(str(other), str(results)).export_tag
    assert _rows(results / "results.db") == [0, 1, 2]
    assert _rows(results / f"results@{tag}.db") == [0, 1, 2, 3, 4]


def test_a_tagged_table_is_ipu_tunes_own_file(tmp_path: Path) -> None:
    table = tmp_path / "results@0a1b2c.db"
    table.write_bytes(b"")
    assert storage_file(table) == "ipu-tune's results table"
    (tmp_path / "results@0a1b2c.db-wal").write_bytes(b"")
    assert storage_file(tmp_path / "results@0a1b2c.db-wal") is not None
    assert reserved_study_name("results@0a1b2c.db") is not None
    assert reserved_study_name("results@2024") is None


@pytest.mark.parametrize("scheme", ["", "sqlite:///"])
def test_one_storage_by_two_paths_is_one_table_and_one_export_folder(
        scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage named from its folder and by its absolute path is one storage: one tag."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    name = "runs/s.db" if scheme == "sqlite:///" else "runs/s.journal"
    tags = {resolve_storage(f"{scheme}{path}", str(tmp_path / "results")).export_tag
            for path in (name, str(tmp_path / name), f"runs/../{name}")}
    if not scheme:
        tags.add(resolve_storage(f"journal://{tmp_path / name}", "results").export_tag)
    assert len(tags) == 1
