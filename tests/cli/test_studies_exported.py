"""`studies` says a study's best plan is exported only when its exports are on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipu_tune.cli.studies_cmd import list_main
from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_a_study_without_its_exports_is_not_said_to_be_exported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = run(compose([f"results_dir={tmp_path}", "study.n_trials=2",
                        "study.progress_bar=false"])).study_name
    capsys.readouterr()
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    (row,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(name)]
    assert row.endswith(", exported")
    # An interrupted study: trials stored, nothing exported yet.
    shutil.rmtree(tmp_path / name)
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    (row,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(name)]
    assert "not exported" in row and "report" in row


def test_a_study_whose_name_report_refuses_is_not_offered_to_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A study stored with Optuna directly under a name no folder can have: `report` refuses
    it, so `studies` says why it cannot be exported instead of pointing at `report`."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    name = run(compose([f"results_dir={tmp_path}", "study.n_trials=2",
                        "study.progress_bar=false"])).study_name
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "ipu_tune.journal")))
    bad = ["../../pwn", "a b", "x" * 101]
    for other in bad:
        optuna.copy_study(from_study_name=name, from_storage=storage, to_storage=storage,
                          to_study_name=other)
    capsys.readouterr()
    assert list_main(["--results-dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    for other in bad:
        (row,) = [x for x in rows if x.startswith(other[:30])]
        assert row.endswith(", not exported, and cannot be: its name is no safe folder name "
                            "(1-100 letters, digits and . _ - + = @ , starting with a letter "
                            "or digit), so `report` refuses it"), row
    assert not (tmp_path.parent / "pwn").exists()


def test_a_study_in_another_storage_is_exported_in_its_tagged_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A storage other than the default exports to `<name>@<tag>`: `studies` looks there."""
    results, db = tmp_path / "results", f"sqlite:///{tmp_path / 'sq.db'}"
    name = run(compose([f"results_dir={results}", f"study.storage={db}", "study.n_trials=2",
                        "study.progress_bar=false"])).study_name
    assert not (results / name).exists()
    capsys.readouterr()
    assert list_main(["--results-dir", str(results), "--storage", db]) == 0
    (row,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(name)]
    assert row.endswith(", exported"), row
