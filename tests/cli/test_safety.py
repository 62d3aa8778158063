"""Safety: nothing escapes results_dir, nothing runs unasked, no credential printed, nothing
lost after a torn journal, every refusal is one line (not a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from ipu_tune.__main__ import main
from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import atomic_write, open_storage, redact, resolve_storage, study_dir
from tests.conftest import REPO, run_cli

FACTORY = "tests.models.factories.tiny_mlp"


def _one_line_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert "Traceback" not in err
    code = info.value.code
    assert isinstance(code, int)
    return code, err


# --- Escapes --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "..", ".", "a/b", "a\\b", "a b",
                                  "x" * 101, "-rf"])
def test_unsafe_study_names_are_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    code, err = _one_line_exit([f"study.name={name}", "study.n_trials=1"], capsys)
    assert code == 2
    assert "study.name=" in err and "safe directory name" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"]


def test_search_name_dotdot_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _one_line_exit(["search.name=../..", "study.n_trials=1"], capsys)
    assert code == 2 and "search.name='../..'" in err
    assert list(tmp_path.iterdir()) == []


def test_newline_in_study_name_is_refused(tmp_path: Path) -> None:
    proc = run_cli(["study.name='a\nipu_tune: x'", "study.n_trials=1", "model=mnist_cnn"],
                   cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "study.name=" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_refuses_paths_outside_root(tmp_path: Path) -> None:
    root = tmp_path / "results"
    with pytest.raises(IpuTuneError, match="outside results_dir"):
        atomic_write(root / "s" / ".." / ".." / "escaped.yaml", "x", root=root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(IpuTuneError, match="outside results_dir"):
        atomic_write(root / "link" / "best.yaml", "x", root=root)
    assert list(outside.iterdir()) == [] and not (tmp_path / "escaped.yaml").exists()
    assert atomic_write(root / "s" / "best.yaml", "ok", root=root).read_text() == "ok"


@pytest.mark.parametrize("name", ["..", "../x", "/etc", "a\nb", "x" * 300])
def test_study_dir_refuses_stored_unsafe_names(name: str, tmp_path: Path) -> None:
    with pytest.raises(IpuTuneError, match=r"study\.name"):
        study_dir(tmp_path, name)


def test_journal_in_a_missing_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _one_line_exit(
        [f"study.storage=journal:///{tmp_path}/no_such_dir/x.journal", "study.n_trials=1"],
        capsys)
    assert code == 2 and "no_such_dir" in err and "does not exist" in err
    assert not (tmp_path / "no_such_dir").exists()


def test_journal_under_results_dir_is_still_created(tmp_path: Path) -> None:
    target = resolve_storage(None, str(tmp_path / "new" / "results"))
    open_storage(target)
    assert Path(target.location).parent.is_dir()


# --- Code named in files --------------------------------------------------------------------


@pytest.mark.parametrize("target", ["subprocess.getoutput", "os.system", "os.popen",
                                    "subprocess.run", "builtins.eval", "posix.system",
                                    "collections.OrderedDict", "torch.nn.functional.relu"])
def test_dangerous_targets_never_run(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "sentinel"
    code, err = _one_line_exit(
        [f"model._target_={target}", f"+model.kwargs.cmd='touch {sentinel}'",
         "study.n_trials=1"], capsys)
    assert code == 2 and "model._target_=" in err
    assert not sentinel.exists()
    if target != "torch.nn.functional.relu":
        assert "standard library" in err or "not a" in err


def test_evaluate_file_with_a_target_needs_the_trust_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "shared.yaml"
    cfg.write_text(f"model: {{_target_: {FACTORY}, input_shape: [8]}}\n")
    code, err = _one_line_exit(["evaluate", str(cfg)], capsys)
    assert code == 2 and "--trust-remote-code" in err and FACTORY in err
    with pytest.raises(SystemExit) as ok:
        main(["evaluate", str(cfg), "--json", "--trust-remote-code"])
    assert ok.value.code == 0
    assert "throughput" in json.loads(capsys.readouterr().out)


def test_evaluate_trusted_file_still_refuses_os_system(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentinel = tmp_path / "sentinel"
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(f"model: {{_target_: os.system, kwargs: {{command: 'touch {sentinel}'}}}}\n")
    code, err = _one_line_exit(["evaluate", str(cfg), "--trust-remote-code"], capsys)
    assert code == 2 and "os.system" in err and not sentinel.exists()
    code, err = _one_line_exit(["evaluate", str(cfg)], capsys)
    assert code == 2 and "--trust-remote-code" in err and not sentinel.exists()


def test_calibrate_file_with_a_target_needs_the_trust_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.yaml"
    rows.write_text(f"- {{model: {{_target_: {FACTORY}, input_shape: [8]}}, "
                    "samples_per_s: 1000}\n")
    code, err = _one_line_exit(["calibrate", str(rows)], capsys)
    assert code == 2 and "--trust-remote-code" in err and FACTORY in err


# --- Credentials ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "postgresql://u:s3cret@h/db",
    "postgresql+psycopg2://u@h/db?password=s3cret",
    "postgresql://u@h/db?sslmode=require&password=s3cret",
    "postgresql://u@h/db?sslpassword=s3cret",
    "postgresql://u@h/db?PASSWORD=s3cret&x=1",
    "postgresql://u:s3cret@h:notaport/db",
    "not a url u:s3cret@h password=s3cret",
    "mysql://u:s3cret@[::1/db",
    # Percent-encoded names: SQLAlchemy and libpq decode them to password.
    "postgresql://u@h/db?%70assword=s3cret",
    "postgresql://u@h/db?sslmode=require&pass%77ord=s3cret",
    "postgresql://u@h/db?%50%41%53%53WORD=s3cret",
])
def test_redact_hides_every_password_form(url: str) -> None:
    out = redact(url)
    assert "s3cret" not in out, out


def test_query_password_is_not_printed_or_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _one_line_exit(
        ["study.storage='postgresql+psycopg2://u@127.0.0.1:1/x?password=s3cret'",
         "study.n_trials=1"], capsys)
    # A server that does not answer is a fault (exit 1), not bad input.
    assert code == 1 and "study.storage" in err and "s3cret" not in err


def test_percent_encoded_query_password_is_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = _one_line_exit(
        ["study.storage='postgresql://u@127.0.0.1:1/x?%70assword=s3cret'", "study.n_trials=1"],
        capsys)
    assert code == 1 and "study.storage" in err and "s3cret" not in err, err


def test_plain_postgresql_url_reaches_the_test_server(pg_url: str) -> None:
    plain = pg_url.replace("postgresql+psycopg2://", "postgresql://")
    study = optuna.create_study(study_name="plain",
                                storage=open_storage(resolve_storage(plain, "results")))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert len(study.trials) == 2


# --- Nothing lost: torn journal tail --------------------------------------------------------


def test_torn_journal_tail_is_cut_and_every_trial_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="s", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=5)
    journal = Path(target.location)
    good = journal.read_bytes()
    torn = b'{"op_code": 4, "worker_id": "x", "trial_id": 5, "sta'
    journal.write_bytes(good + torn)
    capsys.readouterr()
    again = optuna.load_study(study_name="s", storage=open_storage(target))
    err = capsys.readouterr().err
    assert "torn" in err and err.strip().count("\n") == 0
    assert journal.read_bytes() == good
    backups = list(tmp_path.glob("ipu_tune.journal.torn-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == torn
    again.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    # Plain Optuna (no ipu-tune code) reads the repaired file.
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    plain = optuna.load_study(study_name="s",
                              storage=JournalStorage(JournalFileBackend(str(journal))))
    states = [t.state for t in plain.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 7


def test_journal_without_trailing_newline_but_valid_json_is_kept(tmp_path: Path) -> None:
    target = resolve_storage(None, str(tmp_path))
    study = optuna.create_study(study_name="s", storage=open_storage(target))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    journal = Path(target.location)
    journal.write_bytes(journal.read_bytes().rstrip(b"\n"))
    again = optuna.load_study(study_name="s", storage=open_storage(target))
    assert len(again.trials) == 3
    again.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert len(optuna.load_study(study_name="s", storage=open_storage(target)).trials) == 4


# --- One line, not a traceback --------------------------------------------------------------


def test_evaluate_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model: {name: mnist_cnn, input_shape: [1, 28, 28]}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        f"{sys.executable} -m ipu_tune evaluate {cfg} | head -1", shell=True, cwd=tmp_path,
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.stderr == "", proc.stderr
    assert proc.stdout.count("\n") == 1


def test_one_block_model_on_two_ipus_is_a_result(tmp_path: Path) -> None:
    """No split exists; the search still finishes (2 replicas of the one stage)."""
    proc = run_cli(["model._target_=tests.models.factories.one_block", "model.input_shape=[8]",
                    "system.num_ipus=2", "study.name=one", "study.n_trials=3",
                    "study.progress_bar=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "results" / "one" / "best.yaml").is_file()


def test_query_password_of_a_working_storage_appears_nowhere(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db?password=s3cret"
    proc = run_cli([f"study.storage='{url}'", "model=mnist_cnn", "study.name=pw",
                    "study.n_trials=2", "study.progress_bar=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout + proc.stderr
    assert "password=***" in proc.stdout
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"s3cret" not in path.read_bytes(), path


@pytest.mark.parametrize("linked", ["best.yaml", "report.html", "folder"])
def test_an_export_place_linked_outside_is_refused_before_any_trial(
        tmp_path: Path, linked: str) -> None:
    """A study folder or export file linked outside results_dir is refused in one line before
    the search (the check used to wait for the exports, after every trial had run)."""
    results, outside = tmp_path / "results", tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine\n")
    if linked == "folder":
        results.mkdir()
        (results / "s").symlink_to(outside)
    else:
        (results / "s").mkdir(parents=True)
        (results / "s" / linked).symlink_to(outside / "notes.txt")
    done = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=3",
                    "study.progress_bar=false", f"results_dir={results}"], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "outside results_dir" in lines[0] or "is a symlink" in lines[0], lines[0]
    assert not (results / "ipu_tune.journal").exists()  # no study, no trial
    assert (outside / "notes.txt").read_text() == "mine\n" and len(list(outside.iterdir())) == 1


@pytest.mark.parametrize("how", ["on the command line", "set by a config file's defaults list"])
@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_sweep_record_linked_outside_results_dir_is_refused(tmp_path: Path, link: str,
                                                             how: str) -> None:
    """Hydra saves a sweep's record in <results_dir>/multirun/multirun.yaml and follows a
    link there: a linked folder or file is refused before Hydra writes, wherever results_dir
    was set, the file it points to unchanged and nothing made beside it."""
    outside, results = tmp_path / "outside", tmp_path / "runs"  # not the default
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    results.mkdir()
    if link == "folder":
        (results / "multirun").symlink_to(outside)
    else:
        (results / "multirun").mkdir()
        (results / "multirun" / "multirun.yaml").symlink_to(outside / "victim.txt")
    where = [f"results_dir={results}"]
    if how == "set by a config file's defaults list":  # a file of no `_global_` header
        (tmp_path / "conf" / "experiment").mkdir(parents=True)
        (tmp_path / "conf" / "place").mkdir()
        (tmp_path / "conf" / "experiment" / "x.yaml").write_text(
            "# @package _global_\ndefaults:\n  - /place@_global_: here\n")
        (tmp_path / "conf" / "place" / "here.yaml").write_text(f"results_dir: {results}\n")
        where = ["--config-dir", str(tmp_path / "conf"), "+experiment=x"]
    proc = run_cli(["-m", "model=mnist_cnn", "study.n_trials=2", "study.progress_bar=false",
                    *where, "system.num_ipus=1,2"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"ipu-tune: error: results_dir={str(results)!r}: "), proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert (outside / "victim.txt").read_text() == "keep me"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_the_commands_printed_for_a_study_of_your_own_code_run_as_printed(
        tmp_path: Path) -> None:
    """A study of a `model._target_` names code: its best.yaml's evaluate line and the summary's
    next line carry the trust flag, and the evaluate line runs as printed."""
    import shlex

    proc = run_cli(["model._target_=tests.models.factories.tiny_mlp", "model.input_shape=[8]",
                    "system.num_ipus=1", "study.name=own", "study.n_trials=2",
                    "study.progress_bar=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    best = (tmp_path / "results" / "own" / "best.yaml").read_text()
    line = next(ln for ln in best.splitlines() if ln.startswith("# Evaluate it again with: "))
    assert line.endswith(" --trust-remote-code")
    args = shlex.split(line.removeprefix("# Evaluate it again with: "))[3:]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("next: ") and last.count("--trust-remote-code") == 2
