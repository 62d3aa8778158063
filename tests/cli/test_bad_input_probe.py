"""Bad input found by probing the commands from outside: each ends with one line naming the key,
the value and what is allowed, exit 2, no traceback, nothing written; before, each was a
traceback or was silently read as something else."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main
from ipu_tune.cli._trials_table import readable_table
from tests.conftest import run_cli

_MODELS = "allowed: one option by name, one of bert_base"
_IN_MEMORY = ("an in-memory SQLite database (no file); allowed: sqlite:///FILE, or memory for a "
              "study of this process only")

# (id, arguments, text the one-line message must contain). `{tmp}`: the test's folder,
# `{study}`: the results folder of a stored study `s`.
CASES: list[tuple[str, list[str], str]] = [
    # Hydra raised a bare ValueError (a traceback) for a group option that is no name.
    # `~section` (or any key of the schema): Hydra drops it and the defaults take its place.
    ("delete a section", ["~plan"], "~plan: deletion is not allowed (every key of the schema has"
     " a value); allowed: plan.KEY=VALUE"),
    ("delete a group", ["~system"], "~system: deletion is not allowed"),
    ("delete a top-level key", ["~results_dir"], "allowed: results_dir=VALUE"),
    ("delete a nested section", ["~plan.pipeline"], "allowed: plan.pipeline.KEY=VALUE"),
    ("model null", ["model=null"], f"model=null: {_MODELS}"),
    ("system null", ["system=null"], "system=null: allowed: one option by name, one of bow"),
    ("experiment null", ["+experiment=null"],
     "experiment=null: allowed: one option by name, one of seed_mnist, seed_resnet101"),
    ("model null in a sweep", ["-m", "model=resnet50,null"], f"model=null: {_MODELS}"),
    ("model null with a config dir", ["--config-dir", "{tmp}", "model=null"],
     f"model=null: {_MODELS}"),
    ("system null in evaluate", ["evaluate", "{tmp}/ok.yaml", "system=null"],
     "system=null: allowed: one option by name"),
    # `=1`: Hydra read a group of no name (a bare ValueError); evaluate named the key ''.
    ("no key", ["=1"], "'=1': no key before =; allowed: key=value"),
    ("no key in evaluate", ["evaluate", "{tmp}/ok.yaml", "=1"],
     "'=1': no key before =; allowed: key=value"),
    # Sweeps Hydra cannot list: a traceback (ValueError, "ConfigLoader is not set"), or a list
    # of 10**12 values built before the first run.
    ("range of step 0", ["-m", "system.num_ipus=range(0,3,0)"],
     "'system.num_ipus=range(0,3,0)': a range of step 0; allowed: a step other than 0"),
    ("range of 10**12 values", ["-m", "system.num_ipus=range(1,1000000000000)"],
     "999999999999 values; allowed: at most 1000 values in one sweep"),
    ("float range of 4 million values", ["-m",
                                         "plan.available_memory_proportion=range(0.1,0.5,1e-7)"],
     "4000001 values; allowed: at most 1000 values in one sweep"),
    ("range of no value", ["-m", "system.num_ipus=range(5,1)"],
     "'system.num_ipus=range(5,1)': no values; allowed: 1 to 1000 values"),
    ("glob of a group", ["-m", "model=glob(*)"],
     "'model=glob(*)': Hydra's basic sweeper cannot list these values"),
    # A list inside a typed list, from a file or evaluate's overrides (the command line's own
    # cases are in test_bad_input.py).
    ("a list in the splits of a file", ["evaluate", "{tmp}/nested.yaml"],
     "plan.pipeline.splits=[['a'], {'b': 1}]: allowed: a list of str values"),
    ("a list in the splits of a compared file", ["compare", "{tmp}/ok.yaml", "{tmp}/nested.yaml"],
     "plan.pipeline.splits=[['a'], {'b': 1}]: allowed: a list of str values"),
    ("a list in the splits of an evaluate override", ["evaluate", "{tmp}/ok.yaml",
                                                      "plan.pipeline.splits=[[a]]"],
     "plan.pipeline.splits=[['a']]: allowed: a list of str values"),
    ("a list in the objectives of an experiment", ["--config-dir", "{tmp}", "+experiment=obj"],
     "search.objectives=[['throughput']]: allowed: a list of str values"),
    # An empty --storage or --results-dir read as the default storage.
    ("empty storage", ["studies", "--storage", ""], "--storage='': empty; allowed: a journal"),
    ("empty storage of trials", ["trials", "s", "--results-dir", "{study}", "--storage", ""],
     "--storage='': empty; allowed:"),
    ("empty results dir", ["studies", "--results-dir", ""], "--results-dir='': empty; allowed:"),
    # `--fit ''` read as every constant.
    ("calibrate fit of no name", ["calibrate", "--fit", ""],
     "--fit='': names no constant; allowed: comma-separated names of matmul_efficiency"),
    ("calibrate fit of commas", ["calibrate", "--fit", ",,"], "--fit=',,': names no constant"),
    ("calibrate check with an empty fit", ["calibrate", "--check", "--fit", ""],
     "--fit=: a fit option; --check refits nothing"),
    # An in-memory SQLite database: a study lost at exit (one per worker), listed empty.
    ("sqlite without a file", ["model=mnist_cnn", "study.n_trials=1",
                               "study.storage=sqlite:///"], f"study.storage='sqlite:///': "
                                                            f"{_IN_MEMORY}"),
    ("sqlite in memory", ["model=mnist_cnn", "study.n_trials=1",
                          "study.storage=sqlite:///:memory:"], _IN_MEMORY),
    ("sqlite with no path", ["model=mnist_cnn", "study.n_trials=1", "study.storage=sqlite://"],
     _IN_MEMORY),
    ("studies of sqlite in memory", ["studies", "--storage", "sqlite:///:memory:"],
     f"--storage='sqlite:///:memory:': {_IN_MEMORY}"),
    # An infinite bound kept no row (nan was refused already).
    ("where above inf", ["trials", "s", "--results-dir", "{study}", "--where", "samples/s>inf"],
     "--where='samples/s>inf': inf is not a finite number; allowed: a finite number"),
    ("where below -1e999", ["trials", "s", "--results-dir", "{study}", "--where",
                            "throughput<-1e999"], "-1e999 is not a finite number"),
]


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() and not p.is_symlink()
            else None for p in root.rglob("*")}


@pytest.fixture(scope="module")
def stored_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stored")
    proc = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=2",
                    "study.progress_bar=false"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root / "results"


@pytest.mark.parametrize(("case", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(
    case: str, args: list[str], expected: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    (tmp_path / "ok.yaml").write_text("model: {name: resnet18}\n")
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "obj.yaml").write_text(
        "# @package _global_\nsearch: {objectives: [[throughput]]}\n")
    (tmp_path / "nested.yaml").write_text(
        "model: {name: resnet18}\nplan: {pipeline: {splits: [[a], {b: 1}]}}\n")
    monkeypatch.chdir(tmp_path)
    study = str(request.getfixturevalue("stored_study")) if any(
        "{study}" in a for a in args) else ""
    before = _snapshot(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{study}", study) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2, err
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("ipu-tune: error: "), err
    assert expected in err, err
    assert _snapshot(tmp_path) == before, "a bad input wrote something"


def test_a_group_null_in_a_real_process(tmp_path: Path) -> None:
    proc = run_cli(["system=null"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("ipu-tune: error: system=null: allowed: one option by name")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_matching_trial_is_one_line(stored_study: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Before: pandas' `Empty DataFrame`, `Columns: [...]` (every column) and `Index: []`."""
    with pytest.raises(SystemExit) as exit_info:
        main(["trials", "s", "--results-dir", str(stored_study), "--where", "samples/s>1e300"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == (
        "no trials to show: none finished, or none matches --where / --fits")


def test_an_empty_table_reads_as_a_line() -> None:
    import pandas as pd

    assert readable_table(pd.DataFrame({"trial": []})).startswith("no trials to show")


@pytest.mark.parametrize("flag", [["--cfg", "job"], ["--info", "config"], ["-c", "all"]])
def test_hydra_printing_the_config_redacts_a_password(
        flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `storage: postgresql://u:SECRETPW@...` printed as composed."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([*flag, "study.storage=postgresql://u:SECRETPW@127.0.0.1:1/x"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "storage: postgresql://u:***@127.0.0.1:1/x" in out
    assert "SECRETPW" not in out
