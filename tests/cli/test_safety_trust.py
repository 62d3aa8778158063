"""Only model._target_ names code: Hydra's side doors (callbacks, launcher, sweeper, search path,
env_set, logging), caches (profiles, the compose cache) and functions that run commands are
refused before anything runs. Each payload would create a marker file; none may exist after."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from tests.cli._one_line import exit_line
from tests.conftest import run_cli

QUICK = ["model=mnist_cnn", "study.n_trials=1", "study.progress_bar=false"]




def _touch(marker: Path) -> str:
    return f"touch {marker}"


# Each case: overrides with `{m}` for the marker path. All from the command line.
DOORS = [
    ("callback os.system", ["+hydra.callbacks.x._target_=os.system",
                            "+hydra.callbacks.x.command='touch {m}'"]),
    ("callback with ++", ["++hydra.callbacks.x._target_=subprocess.getoutput",
                          "++hydra.callbacks.x.cmd='touch {m}'"]),
    ("callback as a dict value", ["+hydra.callbacks={x:{_target_:os.system,command:'touch {m}'}}"]),
    ("launcher target", ["hydra.launcher._target_=os.system"]),
    ("launcher group", ["hydra/launcher=joblib"]),
    ("sweeper group", ["hydra/sweeper=optuna"]),
    ("callbacks group", ["+hydra/callbacks=x"]),
    ("searchpath pkg", ["hydra.searchpath=[pkg://antigravity]"]),
    ("env_set", ["+hydra.job.env_set.LD_PRELOAD=/tmp/evil.so"]),
    ("logging factory", ["+hydra.job_logging.handlers.h.()=os.system"]),
    ("package into hydra", ["+model@hydra.callbacks=mnist_cnn"]),
    ("a target outside model", ["+plan._target_=os.system"]),
    ("a target in a kwarg", ["+model.kwargs.x={_target_:os.system,command:'touch {m}'}"]),
    ("a non-default job_logging", ["hydra/job_logging=colorlog"]),
]


@pytest.mark.parametrize(("case", "args"), DOORS, ids=[c[0] for c in DOORS])
def test_hydra_side_doors_on_the_command_line_run_nothing(
        case: str, args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    code, err = exit_line([*QUICK, *(a.replace("{m}", str(marker)) for a in args)], capsys)
    assert code == 2, case
    assert err.startswith("ipu-tune: error: "), err
    assert "only model._target_" in err or "Hydra keys" in err, err
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_hydra_callback_in_a_real_process_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    proc = run_cli([*QUICK, "+hydra.callbacks.x._target_=os.system",
                    f"+hydra.callbacks.x.command='touch {marker}'"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "hydra.callbacks.x._target_" in proc.stderr
    assert not marker.exists() and list(tmp_path.iterdir()) == []


# Files in a user config folder (`--config-dir`): (file under the folder, its text).
FILES = [
    ("experiment/cb.yaml", "# @package _global_\nhydra:\n  callbacks:\n    x:\n"
     "      _target_: os.system\n      command: 'touch {m}'\n"),
    ("experiment/cb.yaml", "# @package hydra.callbacks\nx: {_target_: os.system, "
     "command: 'touch {m}'}\n"),
    ("experiment/cb.yaml", "# @package _global_\ndefaults:\n  - override /hydra/launcher: x\n"),
    ("experiment/cb.yaml", "# @package _global_\nhydra: {searchpath: ['pkg://antigravity']}\n"),
    ("experiment/cb.yaml", "# @package _global_\nhydra: {job: {env_set: {X: 'touch {m}'}}}\n"),
    ("experiment/cb.yaml", "# @package _global_\nplan: {_target_: os.system}\n"),
    ("hydra/callbacks/x.yaml", "x: {_target_: os.system, command: 'touch {m}'}\n"),
    # Hydra's files written where the folder says, outside results_dir.
    ("experiment/cb.yaml", "# @package _global_\nhydra: {run: {dir: '{m}'}}\n"),
    ("experiment/cb.yaml", "# @package _global_\nhydra: {output_subdir: '{m}'}\n"),
    ("experiment/cb.yaml", "# @package _global_\ndefaults:\n"
     "  - override /hydra/job_logging: default\n"),
]


@pytest.mark.parametrize(("where", "text"), FILES, ids=[f"file{i}" for i in range(len(FILES))])
def test_hydra_side_doors_in_a_config_dir_run_nothing_even_trusted(
        where: str, text: str, tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    conf = tmp_path / "conf"
    (conf / where).parent.mkdir(parents=True)
    (conf / where).write_text(text.replace("{m}", str(marker)))
    (conf / "experiment").mkdir(exist_ok=True)
    if not (conf / "experiment" / "cb.yaml").exists():
        (conf / "experiment" / "cb.yaml").write_text("# @package _global_\nstudy: {name: y}\n")
    run = tmp_path / "run"
    run.mkdir()
    for extra in ([], ["trust_remote_code=true"]):
        proc = run_cli(["--config-dir", str(conf), "+experiment=cb", *QUICK, *extra], cwd=run)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
        assert not marker.exists() and list(run.iterdir()) == []


def test_a_resolver_in_an_experiment_file_needs_trust(tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "env.yaml").write_text("# @package _global_\nstudy: {name: '${oc.env:SECRET_X}'}\n")
    run = tmp_path / "run"
    run.mkdir()
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "+experiment=env", *QUICK],
                   cwd=run, env={"SECRET_X": "s3cr3tvalue"})
    assert proc.returncode == 2 and "oc.env" in proc.stderr, proc.stderr
    assert "s3cr3tvalue" not in proc.stderr + proc.stdout
    assert list(run.iterdir()) == []


def test_pip_call_subprocess_is_refused_before_it_is_called(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    code, err = exit_line([*QUICK, "model._target_=pip._internal.utils.subprocess.call_subprocess",
                       f"+model.kwargs.cmd=[touch,{marker}]", "+model.kwargs.command_desc=x"],
                      capsys)
    assert code == 2 and "returns str, not a torch.nn.Module" in err, err
    assert not marker.exists() and list(tmp_path.iterdir()) == []


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_pickle_planted_in_the_cache_folder_runs_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    marker = tmp_path / "PWNED"
    bomb = pickle.dumps(_Payload(marker))
    for sub in ("profiles/x.json", "joblib/ipu_tune/models/_profiler/_cached_profile/a/output.pkl"):
        (cache / sub).parent.mkdir(parents=True, exist_ok=True)
        (cache / sub).write_bytes(bomb)
    run = tmp_path / "run"
    run.mkdir()
    env = {"IPU_TUNE_CACHE_DIR": str(cache)}
    proc = run_cli([*QUICK, "study.name=p"], cwd=run, env=env)
    assert proc.returncode == 0, proc.stderr
    for path in (cache / "profiles").iterdir():  # plant over every entry, run again
        path.write_bytes(bomb)
    again = run_cli([*QUICK, "study.name=p", "study.n_trials=2"], cwd=run, env=env)
    assert again.returncode == 0, again.stderr
    assert not marker.exists()


COMPOSE_EDITS = [
    ("results_dir", lambda d, out: d.update(results_dir=str(out))),
    ("study.storage", lambda d, out: d["study"].update(storage=f"{out}/x.journal")),
    ("study.name", lambda d, out: d["study"].update(name="../../escaped")),
    ("model._target_", lambda d, out: d["model"].update(_target_="tests.models.factories.x")),
]


@pytest.mark.parametrize(("key", "edit"), COMPOSE_EDITS, ids=[e[0] for e in COMPOSE_EDITS])
def test_an_edited_compose_cache_changes_nothing(key: str, edit: object, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run = tmp_path / "run"
    run.mkdir()
    env = {"IPU_TUNE_CACHE_DIR": str(cache)}
    first = run_cli([*QUICK, "study.name=c"], cwd=run, env=env)
    assert first.returncode == 0, first.stderr
    composed = list(cache.glob("compose-*.json"))
    assert composed, "the quick path wrote no compose cache"
    outside = tmp_path / "outside"
    for path in composed:
        data = json.loads(path.read_text())
        edit(data, outside)  # type: ignore[operator]
        path.write_text(json.dumps(data))
    again = run_cli([*QUICK, "study.n_trials=2"], cwd=run, env=env)
    assert again.returncode == 0, (key, again.stderr)
    assert not outside.exists() and not (tmp_path / "escaped").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "run"]
    assert os.path.getsize(run / "results" / "ipu_tune.journal") > 0
    assert "tiny_mlp" not in again.stdout and "factories" not in again.stderr


def _journal_study(results: Path, name: str) -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(results / "ipu_tune.journal")))
    return optuna.load_study(study_name=name, storage=storage)


@pytest.mark.parametrize("profiled_otherwise", [False, True])
@pytest.mark.parametrize("stored", ["0.9.0", "2.0.0-rc1", "99.0.0"])
def test_a_study_of_another_simulator_version_is_never_mixed(
        stored: str, profiled_otherwise: bool, tmp_path: Path) -> None:
    """Another simulator's study is left as it was, also when that ipu-tune's profiler
    recorded the model otherwise (a field added since): the same problem, older scores, not
    "another model"."""
    first = run_cli([*QUICK, "study.n_trials=2"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    results = tmp_path / "results"
    name = next(s.study_name for s in optuna.get_all_study_summaries(
        JournalStorage(JournalFileBackend(str(results / "ipu_tune.journal")))))
    study = _journal_study(results, name)
    meta = dict(study.user_attrs["ipu_tune"])
    meta["simulator_version"] = stored
    if profiled_otherwise:
        meta["inputs"] = {**meta["inputs"], "model (as profiled)": "0" * 16}
    study.set_user_attr("ipu_tune", meta)
    if profiled_otherwise:
        report = run_cli(["report", name], cwd=tmp_path)
        assert report.returncode == 2 and report.stderr.count("\n") == 1, report.stderr
        assert f"its trials were scored by simulator {stored}" in report.stderr
    named = run_cli([*QUICK, f"study.name={name}", "study.n_trials=3"], cwd=tmp_path)
    assert named.returncode == 2 and named.stderr.strip().count("\n") == 0, named.stderr
    assert f"simulator_version: '{stored}'" in named.stderr
    default = run_cli([*QUICK, "study.n_trials=3"], cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert f"starting study '{name}-sim" in default.stderr
    assert len(_journal_study(results, name).trials) == 2  # the old study is left as it was


def test_text_in_a_number_column_of_the_results_table_is_handled(tmp_path: Path) -> None:
    args = [*QUICK, "study.name=t", "study.n_trials=3"]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    con = sqlite3.connect(tmp_path / "results" / "results.db")
    con.execute("UPDATE ipu_tune_results SET throughput = 'abc', io_tiles = 'x', "
                "peak_memory_bytes = 'many' WHERE trial_number = 1")
    con.commit()
    con.close()
    for argv in (["report", "t"], ["export", "t", "--output", str(tmp_path / "t.csv")],
                 [*QUICK, "study.name=t", "study.n_trials=4"]):
        proc = run_cli(argv, cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", ["\x1b[31mred\x1b[0m", "a\nipu-tune: forged", "bell\x07x"])
def test_studies_shows_control_characters_escaped(name: str, tmp_path: Path) -> None:
    journal = tmp_path / "x.journal"
    optuna.create_study(study_name=name, storage=JournalStorage(JournalFileBackend(str(journal))))
    proc = run_cli(["studies", "--storage", str(journal)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not any(c in proc.stdout for c in "\x1b\x07")
    assert not any(line.startswith("ipu-tune: forged") for line in proc.stdout.splitlines())
    assert len(proc.stdout.strip().splitlines()) == 2


def test_trials_shows_control_characters_of_a_stored_trial_escaped(tmp_path: Path) -> None:
    # Whoever shares a study controls its trials' text: it must not retitle or clear the
    # terminal of who lists them (OSC 0 sets the title, CSI 2J clears the screen).
    args = [*QUICK, "study.name=t", "study.n_trials=2"]
    assert run_cli(args, cwd=tmp_path).returncode == 0
    journal = tmp_path / "results" / "ipu_tune.journal"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    for rec in records:
        plan = (rec.get("user_attr") or {}).get("plan")
        if isinstance(plan, str):
            held = json.loads(plan)
            held["result"]["bottleneck"] = "c\x1b]0;owned\x07\x1b[2J"
            rec["user_attr"]["plan"] = json.dumps(held)
    journal.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    for argv in (["trials", "t"], ["trials", "t", "--csv"]):
        proc = run_cli(argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "\\x1b]0;owned\\x07" in proc.stdout
        assert not any(c in proc.stdout for c in "\x1b\x07"), argv


@pytest.mark.parametrize("thing", ["fifo", "device"])
def test_a_config_dir_file_that_never_ends_is_one_line(thing: str, tmp_path: Path) -> None:
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    if thing == "fifo":
        os.mkfifo(conf / "f.yaml")
    else:
        (conf / "f.yaml").symlink_to("/dev/zero")
    run = tmp_path / "run"
    run.mkdir()
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "+experiment=f", *QUICK], cwd=run,
                   timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and list(run.iterdir()) == []


@pytest.mark.parametrize("value", [
    '"${study.storage}"',  # a copy of another value: the storage URL, its password with it
    '"\\u0024{oc.env:SECRET_X}"',  # a resolver YAML writes with an escape
    '"${oc.${study.name}:SECRET_X}"',  # a resolver whose name is itself interpolated
    '"x-${model.name}"',
], ids=["copy", "escaped", "nested", "inside a string"])
def test_any_interpolation_in_a_config_file_needs_trust(tmp_path: Path, value: str) -> None:
    """The check reads the file as YAML does: an interpolation of any kind, however written,
    is refused in one line before anything is stored, and the secret is printed nowhere."""
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "leak.yaml").write_text(
        f"# @package _global_\nmodel: {{kwargs: {{note: {value}}}}}\n")
    run = tmp_path / "run"
    run.mkdir()
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "+experiment=leak", *QUICK,
                    "study.storage=sqlite:///s.db"], cwd=run, env={"SECRET_X": "s3cr3tvalue"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "interpolates" in proc.stderr
    assert "trust_remote_code=true" in proc.stderr
    assert "s3cr3tvalue" not in proc.stderr + proc.stdout
    assert list(run.iterdir()) == []


def test_a_target_interpolated_from_a_config_file_is_not_typed(tmp_path: Path) -> None:
    """`model._target_=${model.name}` on the command line takes the code name from a file:
    it needs the trust flag like a target written in the file, and nothing is imported."""
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "evil.yaml").write_text(
        "name: pwnmod.factory\ninput_shape: [4]\nnum_classes: 4\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "pwnmod.py").write_text(
        "open('PWNED', 'w').close()\ndef factory(): ...\n")
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "model=evil",
                    "model._target_=${model.name}", "study.n_trials=1", "study.progress_bar=false",
                    f"results_dir={tmp_path / 'r'}"], cwd=run)
    assert proc.returncode == 2, proc.stderr
    assert "interpolates its code name from the config" in proc.stderr
    assert not (run / "PWNED").exists() and not (tmp_path / "r").exists()
