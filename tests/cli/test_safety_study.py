"""Safety on stored studies: exports to unwritable places, code named by a stored study or a
config file, and a full disk (a small tmpfs) that a resume recovers from."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

import ipu_tune
from tests.cli._one_line import exit_line
from tests.conftest import run_cli

TARGET = "tests.models.factories.tiny_mlp"


@contextmanager
def _tmpfs(where: Path, size: str, *options: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)




@pytest.mark.parametrize("where", ["/proc/ipu_tune_table.csv", "{tmp}/a_dir.csv",
                                   "/proc/self/status.csv"])
def test_export_output_unwritable_is_one_line(
    where: str, stored_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_dir.csv").mkdir()
    out = where.replace("{tmp}", str(tmp_path))
    code, err = exit_line(["export", "s", "--output", out, "--results-dir", str(stored_study)],
                          capsys)
    refusal = "exists and is a directory" if out.endswith("a_dir.csv") else "cannot be written"
    assert code == 2 and out in err and refusal in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_dir.csv"]
    assert list((tmp_path / "a_dir.csv").iterdir()) == []


def test_export_output_read_only_place_is_one_line(
    stored_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _tmpfs(tmp_path / "ro", "1m", "ro") as ro:
        out = str(ro / "t.csv")
        code, err = exit_line(["export", "s", "--output", out, "--results-dir", str(stored_study)],
                          capsys)
        # A read-only disk is a fault of the machine (exit 1), not bad input (2).
        assert code == 1 and f"--output={out!r}" in err and "Read-only" in err


@contextmanager
def _read_only(source: Path, where: Path) -> Iterator[Path]:
    """`source` seen read-only at `where` (a read-only bind mount, as an archive or a shared
    results folder mounted read-only)."""
    where.mkdir(parents=True)
    if subprocess.run(["mount", "--bind", str(source), str(where)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here (needs root)")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_read_only_results_dir_is_read_and_refused_for_writing(
    stored_study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: every command on a read-only results folder ended with `--results-dir=...:
    cannot be written (Permission denied)` and exit 2, the ones that only read included."""
    with _read_only(stored_study, tmp_path / "ro") as ro:
        results = ["--results-dir", str(ro)]
        for command in (["studies"], ["trials", "s", "--top", "2"],
                        ["explain", "s", "--no-sensitivity"]):
            code, err = exit_line([*command, *results], capsys)
            assert code == 0 and err == "", (command, err)
        out = tmp_path / "t.csv"
        assert exit_line(["export", "s", "--output", str(out), *results], capsys)[0] == 0
        assert len(out.read_text().splitlines()) == 1 + 2  # every trial of the stored study
        writes = {("report", "s"): f"export path={str(ro / 's' / 'best.yaml')!r}",
                  ("export", "s", "--output", str(ro / "t.csv")):
                      f"--output={str(ro / 't.csv')!r}"}
        for command, named in writes.items():
            code, err = exit_line([*command, *results], capsys)
            assert code == 1 and named in err and "(Read-only file system)" in err, err
        points = Path(ipu_tune.__file__).parent / "calibration" / "points.yaml"
        code, err = exit_line(["calibrate", str(points), "--output", str(ro / "c.yaml")], capsys)
        assert code == 1 and f"--output={str(ro / 'c.yaml')!r}" in err, err
        tune = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=5",
                        "study.progress_bar=false", f"results_dir={ro}"], cwd=tmp_path)
        assert tune.returncode == 1, tune.stderr
        assert tune.stderr.strip() == (
            f"ipu-tune: error: results_dir={str(ro)!r}: cannot be written (Read-only file "
            "system); make it writable, or choose another folder")
        assert sorted(p.name for p in (ro / "s").iterdir()) == sorted(
            p.name for p in (stored_study / "s").iterdir())


def test_a_sqlite_study_in_a_read_only_folder_is_read_and_refused_for_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: reading it said `claim lock ...: cannot be opened (Read-only file system);
    allowed: a regular file (remove what is there)`, exit 2 (its lock file could not be made,
    and SQLite opens a WAL database in a read-only folder only as immutable)."""
    db = tmp_path / "db"
    db.mkdir()
    first = run_cli(["model=mnist_cnn", "study.name=q", "study.n_trials=3",
                     "study.progress_bar=false", f"study.storage=sqlite:///{db / 'st.db'}"],
                    cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    with _read_only(db, tmp_path / "ro") as ro:
        url = f"sqlite:///{ro / 'st.db'}"
        for command in (["studies"], ["trials", "q"]):
            code, err = exit_line([*command, "--storage", url], capsys)
            assert code == 0 and err == "", (command, err)
        out = tmp_path / "q.csv"
        assert exit_line(["export", "q", "--storage", url, "--output", str(out)], capsys)[0] == 0
        assert len(out.read_text().splitlines()) == 1 + 3
        tune = run_cli(["model=mnist_cnn", "study.name=q", "study.n_trials=5",
                        "study.progress_bar=false", f"study.storage={url}"], cwd=tmp_path)
        assert tune.returncode == 1, tune.stderr
        assert tune.stderr.strip() == (
            f"ipu-tune: error: study.storage={url!r}: folder {str(ro)!r}: cannot be written "
            "(Read-only file system); make it writable, or choose another folder")


def test_report_of_a_stored_target_needs_the_trust_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = run_cli([f"model._target_={TARGET}", "model.input_shape=[8]", "study.name=t",
                    "study.n_trials=2", "study.progress_bar=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = str(tmp_path / "results")
    code, err = exit_line(["report", "t", "--results-dir", results], capsys)
    assert code == 2 and "--trust-remote-code" in err and TARGET in err
    code, _ = exit_line(["report", "t", "--results-dir", results, "--trust-remote-code"], capsys)
    assert code == 0


def test_target_from_a_config_dir_needs_trust_remote_code(tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    sentinel = tmp_path / "sentinel"
    (conf / "shared.yaml").write_text(
        "# @package _global_\n"
        f"model: {{_target_: {TARGET}, input_shape: [8]}}\n")
    args = ["--config-dir", str(tmp_path / "conf"), "+experiment=shared", "study.name=x",
            "study.n_trials=1", "study.progress_bar=false"]
    proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "trust_remote_code=true" in proc.stderr and TARGET in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and not sentinel.exists()
    assert not (tmp_path / "results" / "x").exists()
    ok = run_cli([*args, "trust_remote_code=true"], cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "results" / "x" / "best.yaml").is_file()


def _complete(journal: Path, name: str) -> int:
    """Finished trials as plain Optuna (no ipu-tune code) reads the journal."""
    storage = JournalStorage(JournalFileBackend(str(journal)))
    study = optuna.load_study(study_name=name, storage=storage)
    # COMPLETE (feasible) or PRUNED (infeasible, no value).
    return sum(t.state.is_finished() and t.state != optuna.trial.TrialState.FAIL
               for t in study.trials)


def test_full_disk_is_one_line_and_a_resume_recovers_every_trial(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", "400k") as disk:
        args = ["model=mnist_cnn", "study.name=full", "study.progress_bar=false"]
        proc = run_cli([*args, "study.n_trials=500"], cwd=disk)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().count("\n") == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "free space" in proc.stderr
        journal = disk / "results" / "ipu_tune.journal"
        before = _complete(journal, "full")
        assert before > 0
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = run_cli([*args, f"study.n_trials={before + 3}"], cwd=disk)
        assert again.returncode == 0, again.stderr
        assert f"{before + 3} finished trials" in again.stdout
        assert _complete(journal, "full") == before + 3


@pytest.mark.parametrize("size", ["8k", "40k", "120k"])
def test_a_disk_full_at_any_point_exits_1_saying_free_space(size: str, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "disk", size) as disk:
        proc = run_cli(["model=mnist_cnn", "study.name=f", "study.n_trials=300",
                        "study.progress_bar=false"], cwd=disk)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().count("\n") == 0, proc.stderr
        assert "free space" in proc.stderr and "Traceback" not in proc.stderr
