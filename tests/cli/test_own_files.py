"""A storage's files are never written over nor followed out of results_dir, and no study
exports among them: `--output` naming a journal, a SQLite database, a lock or claim file is
refused; a study name that is another study's export folder or one of those files is refused
before the first trial; a journal, results.db or claims folder linked outside results_dir is
refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipu_tune._own_files import reserved_study_name, storage_file
from tests.cli._one_line import exit_line

_LOCK = "ipu_tune.journal.ipu_tune-lock"




@pytest.mark.parametrize("name", ["ipu_tune.journal", "results.db", _LOCK,
                                  "ipu_tune.journal.claims", "ipu_tune.journal.claims.refine"])
def test_calibrate_output_onto_a_storage_file_is_refused(
        name: str, stored_study: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = stored_study / name
    before = target.read_bytes()
    code, err = exit_line(["calibrate", "--fit", "matmul_efficiency", "--max-evals", "10",
                       "--output", str(target)], capsys)
    assert code == 2 and err.startswith(f"ipu-tune: error: --output='{target}': exists and is")
    assert target.read_bytes() == before


@pytest.mark.parametrize("source", ["results.db", "ipu_tune.journal"])
def test_export_output_onto_a_storage_under_another_name_is_refused(
        source: str, stored_study: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Recognised by what it holds: a SQLite database or a journal named `s.csv`."""
    target = tmp_path / "s.csv"
    shutil.copy(stored_study / source, target)
    before = target.read_bytes()
    code, err = exit_line(["export", "s", "--results-dir", str(stored_study), "--output",
                       str(target)], capsys)
    assert code == 2 and "exists and is a" in err and "keeps the studies" in err
    assert target.read_bytes() == before
    (tmp_path / "s.csv-wal").write_bytes(b"")  # its SQLite companion: by the name beside it
    if source == "results.db":
        assert storage_file(tmp_path / "s.csv-wal") is not None


def test_storage_file_knows_a_plain_file_from_a_storage_file(tmp_path: Path) -> None:
    plain = tmp_path / "t.csv"
    plain.write_text('{"op_code": 1}\n')  # JSON, but no journal record
    assert storage_file(plain) is None
    (tmp_path / "j.log").write_text('{"op_code": 0, "worker_id": "w", "study_name": "s"}\n')
    assert storage_file(tmp_path / "j.log") == "an Optuna journal"
    (tmp_path / "j.log.claims").write_text("")
    assert storage_file(tmp_path / "j.log.claims") is not None


@pytest.mark.parametrize("name", ["mnist_cnn-mk2x2-throughput@508048", "s@memory",
                                  "ipu_tune.journal.claims.running", "results.db-wal",
                                  "results.db", "ipu_tune.journal.lock", "studies.db-shm",
                                  "multirun"])
def test_a_study_name_among_the_storage_files_is_refused_before_the_first_trial(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exit_line(["model=mnist_cnn", "study.n_trials=1", f"results_dir={tmp_path}",
                       f"study.name={name}", "study.progress_bar=false"], capsys)
    assert code == 2 and err.startswith(f"ipu-tune: error: study.name='{name}': ")
    assert "allowed:" in err
    assert list(tmp_path.iterdir()) == []  # refused before anything was made


@pytest.mark.parametrize("name", ["run@2024", "s", "a.journal-notes", "v1@abc", "my-journal",
                                  "ablation-wal", "x-shm", "v2.claims"])
def test_other_names_with_at_or_dots_stay_allowed(name: str) -> None:
    assert reserved_study_name(name) is None


@pytest.mark.parametrize("name", ["results.db", "ipu_tune.journal",
                                  "ipu_tune.journal.claims.running"])
def test_a_storage_file_linked_outside_results_dir_is_refused(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results, outside = tmp_path / "results", tmp_path / "outside"
    results.mkdir()
    outside.mkdir()
    (results / name).symlink_to(outside / f"new-{name}")
    code, err = exit_line(["model=mnist_cnn", "study.n_trials=1", f"results_dir={results}",
                       "study.progress_bar=false"], capsys)
    assert code == 2 and "resolves outside results_dir" in err and name in err
    assert list(outside.iterdir()) == []
    code, err = exit_line(["studies", "--results-dir", str(results)], capsys)
    assert code == 2


def test_the_claims_folder_takes_no_output(stored_study: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    target = stored_study / "ipu_tune.journal.claims.running" / "x.yaml"
    code, err = exit_line(["calibrate", "--fit", "matmul_efficiency", "--max-evals", "10",
                       "--output", str(target)], capsys)
    assert code == 2 and "claims" in err and not target.exists()


@pytest.mark.parametrize("place", ["results_dir", "results_dir below it", "study.storage"])
def test_nothing_goes_into_a_storages_claims_folder(
        place: str, stored_study: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The claims folder holds the workers' records, which recovery reads: neither a results
    folder nor a storage is made there (the exports would land among the claims)."""
    claims = stored_study / "ipu_tune.journal.claims.running"
    claims.mkdir(exist_ok=True)
    before = sorted(claims.iterdir())
    results = claims / "sub" if place == "results_dir below it" else claims
    storage = [f"study.storage={claims / 'j.journal'}"] if place == "study.storage" else []
    results_dir = tmp_path / "r" if storage else results
    code, err = exit_line(["model=mnist_cnn", "study.n_trials=1", f"results_dir={results_dir}",
                           *storage, "study.progress_bar=false"], capsys)
    key = "study.storage" if storage else "results_dir"
    assert code == 2 and err.startswith(f"ipu-tune: error: {key}=") and "claims" in err, err
    assert "allowed: a folder outside it" in err
    assert sorted(claims.iterdir()) == before


def test_a_study_folder_linked_outside_results_dir_names_the_folder_and_what_is_allowed(
        stored_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report s` blamed `study.name`, a key the user never gave, and said nothing allowed."""
    results, outside = tmp_path / "results", tmp_path / "outside"
    shutil.copytree(stored_study, results)
    shutil.rmtree(results / "s")
    outside.mkdir()
    (results / "s").symlink_to(outside)
    code, err = exit_line(["report", "s", "--results-dir", str(results)], capsys)
    assert code == 2, err
    assert err.startswith(f"ipu-tune: error: study 's': its folder '{results / 's'}' resolves "
                          f"outside results_dir='{results}' (a link); allowed: a folder in "
                          "results_dir (remove the link)"), err
    assert list(outside.iterdir()) == []
