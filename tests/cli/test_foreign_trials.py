"""A trial is its study's only when its stored config is one of the study's plans: a trial
written into a shared storage with another model (`model._target_` naming code), system or
unsearched key is refused in one line by every reader of stored configs (report and the
exports, explain, trials, the tuner's own export), trusted or not, before anything it names is
imported or written. `trials`, a listing of what each trial stored (a `mode` column for an
old study of two modes), and `export --output`, a table of figures, refuse only another model
or system."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli

_PWN = ('import pathlib, torch\npathlib.Path(__file__).with_name("PWNED").write_text("x")\n'
        "def factory(**kw):\n    return torch.nn.Linear(4, 4)\n")


def _planted(stored_study: Path, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the study whose trials' stored configs (JSON text in the journal, its quotes
    escaped) say `new` where they said `old`; the study's own config is left as it was."""
    results = tmp_path / "results"
    shutil.copytree(stored_study, results)
    journal = results / "ipu_tune.journal"
    text = journal.read_text()
    escaped = old.replace('"', '\\"'), new.replace('"', '\\"')
    assert escaped[0] in text
    journal.write_text(text.replace(*escaped))
    (tmp_path / "pwnmod.py").write_text(_PWN)
    shutil.rmtree(results / "s")
    return results


@pytest.mark.parametrize(("old", "new", "key", "listed"), [
    ('"_target_":null', '"_target_":"pwnmod.factory"', "model._target_=pwnmod.factory", False),
    ('"optimizer":"adamw"', '"optimizer":"sgd"', "workload.optimizer=sgd", True),
    ('"num_ipus":2', '"num_ipus":4', "system.num_ipus=4", False),
])
def test_a_trial_of_another_problem_is_refused_everywhere(
        old: str, new: str, key: str, listed: bool, stored_study: Path, tmp_path: Path) -> None:
    results = _planted(stored_study, tmp_path, old, new)
    commands = ("report", "explain") if listed else ("report", "explain", "trials")
    runs = [[cmd, "s", "--results-dir", str(results), *trust]
            for cmd in commands for trust in ([], ["--trust-remote-code"])]
    if not listed:  # a table of figures: another model's or system's rows are not the study's
        runs.append(["export", "s", "--results-dir", str(results),
                     "--output", str(tmp_path / "t.csv")])
    runs.append(["model=mnist_cnn", "study.name=s", "study.n_trials=3",
                 "study.progress_bar=false", f"results_dir={results}"])
    for args in runs:
        proc = run_cli(args, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (args, proc.stderr)
        assert "is not this study's" in lines[0] and key in lines[0], lines[0]
        assert "Traceback" not in proc.stderr
        if listed:  # a key the search holds fixed: the plan nearest in the search names it
            assert "a value this study's search does not draw (its nearest plan has " \
                   "adamw)" in lines[0], lines[0]
    assert not (tmp_path / "PWNED").exists()
    assert not (results / "s").exists()  # no export, no report
    assert not (tmp_path / "t.csv").exists()
    if listed:
        shown = run_cli(["trials", "s", "--results-dir", str(results)], cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr


def test_a_transformers_config_with_integer_label_keys_keeps_its_own_trials(
        tmp_path: Path) -> None:
    """`id2label: {0: a}` comes back from the stored JSON with the key "0": the same model, not
    another problem's trial (a new study refused its own trial 0)."""
    results = tmp_path / "r"
    args = ["model=hf", "model.hf.model_type=gpt2",
            "model.hf.config={n_layer: 2, id2label: {0: a, 1: b}}", "study.n_trials=2",
            "study.progress_bar=false", f"results_dir={results}"]
    proc = run_cli(args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = run_cli(["explain", "gpt2-mk2x2-throughput", "--results-dir", str(results)],
                    cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr


@pytest.mark.parametrize(("value", "shown"), [("NaN", "nan"), ("null", "None"),
                                              ('"abc"', "'abc'")])
def test_a_stored_objective_value_that_is_not_a_number_is_refused(
        stored_study: Path, tmp_path: Path, value: str, shown: str) -> None:
    """Optuna fails a trial whose objective is NaN; a storage edited to hold one was listed as
    a fitting, feasible trial with no figure (and a null or a string crashed the check)."""
    import re

    results = tmp_path / "results"
    shutil.copytree(stored_study, results)
    journal = results / "ipu_tune.journal"
    text, count = re.subn(r'"values":\[[^]]*\]', f'"values":[{value}]', journal.read_text(),
                          count=1)
    assert count == 1
    journal.write_text(text)
    shutil.rmtree(results / "s")
    for command in ("trials", "report", "explain"):
        proc = run_cli([command, "s", "--results-dir", str(results)], cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (command, proc.stderr)
        assert f"trial 0 stored the objective values [{shown}]" in lines[0], lines[0]
    assert not (results / "s").exists()
    # The listing lists it, with the reason the other commands refuse it (it said nothing).
    listed = run_cli(["studies", "--results-dir", str(results)], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("s "))
    assert f"refused: trial 0 stored the objective values [{shown}]" in row, listed.stdout


def test_a_null_objective_in_a_database_is_refused_in_one_line(tmp_path: Path) -> None:
    """SQLite stores a NaN as NULL, which Optuna's reader asserts against: `studies` crashed
    with a traceback; it lists the study as refused, and `trials` refuses it in one line."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'n.db'}"
    made = run_cli(["model=mnist_cnn", "study.n_trials=2", "study.progress_bar=false",
                    f"study.storage={url}", f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    with sqlite3.connect(tmp_path / "n.db") as db:
        db.execute("UPDATE trial_values SET value = NULL")
    listed = run_cli(["studies", "--storage", url], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "refused: storage " in listed.stdout and "is NULL where Optuna stores a number" \
        in listed.stdout, listed.stdout
    shown = run_cli(["trials", "mnist_cnn-mk2x2-throughput", "--storage", url], cwd=tmp_path)
    lines = shown.stderr.strip().splitlines()
    assert shown.returncode == 2 and len(lines) == 1, shown.stderr
    assert "is NULL where Optuna stores a number" in lines[0]
