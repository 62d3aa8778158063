"""A stored study keeps what the files its config names held (a constants file, a space file):
the commands on it (`report`, `explain`, `trials`) read those values and never open a file a
stored config names, which anyone who can write the storage could point at a file of the
reader's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from tests.conftest import REPO, run_cli

_SECRET = "alice:$6$salt$SECRETHASH:19000:0:99999:7:::\nexport TOKEN: SECRET_hunter2\n"
_READERS = (["report", "s"], ["explain", "s"], ["trials", "s"])


def _study(results: Path) -> optuna.Study:
    storage = JournalStorage(JournalFileBackend(str(results / "ipu_tune.journal")))
    return optuna.load_study(study_name="s", storage=storage)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study `s` tuned with a constants file and a space file of its own."""
    root = tmp_path_factory.mktemp("files")
    (root / "constants.yaml").write_text("call_overhead_s: 0.03\n")
    (root / "space.yaml").write_text((REPO / "search_spaces" / "throughput.yaml").read_text())
    proc = run_cli(["model=mnist_cnn", "study.name=s", "study.n_trials=3",
                    "study.progress_bar=false", f"simulator.constants={root / 'constants.yaml'}",
                    f"search.space={root / 'space.yaml'}"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


def _copy(tuned: Path, tmp_path: Path) -> Path:
    """A copy of the tuned folder, to edit."""
    shutil.copytree(tuned, tmp_path / "copy")
    return tmp_path / "copy"


def _edit(root: Path, files: Any, **config: Any) -> None:
    """The stored study `s` of `root`, its kept files and config sections replaced."""
    study = _study(root / "results")
    meta = dict(study.user_attrs["ipu_tune"])
    meta["config"] = {**meta["config"], **config}
    study.set_user_attr("ipu_tune", {**meta, "files": files})


def _read_without_secrets(root: Path) -> None:
    """Every reader of study `s` in `root` succeeds and shows nothing marked SECRET."""
    for argv in _READERS:
        proc = run_cli(argv, cwd=root)
        assert proc.returncode == 0, (argv, proc.stderr)
        assert "SECRET" not in proc.stdout + proc.stderr


def test_the_commands_on_a_stored_study_read_its_kept_values_not_its_files(
        tuned: Path, tmp_path: Path) -> None:
    tuned = _copy(tuned, tmp_path)
    kept = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    assert kept["simulator.constants"]["call_overhead_s"] == 0.03
    assert "knobs" in kept["search.space"]
    for name in ("constants.yaml", "space.yaml"):  # replaced by what a reader must not show
        (tuned / name).write_text(_SECRET)
    _read_without_secrets(tuned)


def test_a_stored_study_naming_a_file_it_does_not_keep_is_refused_unopened(
        tuned: Path, tmp_path: Path) -> None:
    """A study edited by hand (or made before studies kept the values) names a file of the
    reader's: refused in one line, before it is read (nothing of it shown)."""
    tuned = _copy(tuned, tmp_path)
    secret = tmp_path / "credentials"
    secret.write_text(_SECRET)
    simulator = dict(_study(tuned / "results").user_attrs["ipu_tune"]["config"]["simulator"])
    _edit(tuned, {}, simulator={**simulator, "constants": str(secret)})
    for argv in _READERS:
        proc = run_cli(argv, cwd=tuned)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (argv, proc.stderr)
        assert f"simulator.constants='{secret}'" in lines[0]
        assert "open no file its config names" in lines[0] and "SECRET" not in lines[0]


@pytest.mark.parametrize("kept", ["x", [1], None, {"call_overhead_s": 99.0},
                                  {"aws_secret": "SECRET_hunter2"}])
def test_kept_constants_edited_by_hand_are_one_line_naming_the_study_key(
        tuned: Path, tmp_path: Path, kept: Any) -> None:
    tuned = _copy(tuned, tmp_path)
    files = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    _edit(tuned, {**files, "simulator.constants": kept})
    for argv in _READERS:
        proc = run_cli(argv, cwd=tuned)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (argv, proc.stderr)
        assert "simulator.constants=" in lines[0] and "(as the study read it)" in lines[0]
        assert "SECRET" not in lines[0]


_CONFIG_JSON = ('{"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, '
                '"num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 1000}')


@pytest.fixture(scope="module")
def tuned_hf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study `s` of a Transformers model read from a config.json."""
    root = tmp_path_factory.mktemp("hf")
    (root / "config.json").write_text(_CONFIG_JSON)
    proc = run_cli(["model=hf", f"model.hf.config_file={root / 'config.json'}",
                    "model.sequence_length=32", "study.name=s", "study.n_trials=3",
                    "study.progress_bar=false"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


def test_the_commands_read_the_config_json_the_study_kept_not_the_file(
        tuned_hf: Path, tmp_path: Path) -> None:
    """The Transformers model is profiled, explained and exported from the config.json the
    study kept: the file replaced by one of the reader's is neither read nor shown."""
    tuned = _copy(tuned_hf, tmp_path)
    kept = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    assert kept["model.hf.config_file"]["hidden_size"] == 64
    (tuned / "config.json").write_text('{"model_type": "bert", "hidden_size": "SECRET_x", '
                                       '"num_hidden_layers": "SECRET_y"}')
    _read_without_secrets(tuned)


def test_a_study_older_than_kept_config_json_is_refused_then_kept_on_resume(
        tuned_hf: Path, tmp_path: Path) -> None:
    """A study made before studies kept the config.json names a file the commands do not
    open: refused in one line; the study's own command, run again, keeps it."""
    tuned = _copy(tuned_hf, tmp_path)
    files = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    del files["model.hf.config_file"]
    _edit(tuned, files)
    proc = run_cli(["report", "s"], cwd=tuned)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "model.hf.config_file=" in lines[0] and "open no file its config names" in lines[0]
    again = run_cli(["model=hf", f"model.hf.config_file={tuned_hf / 'config.json'}",
                     "model.sequence_length=32", "study.name=s", "study.n_trials=3",
                     "study.progress_bar=false"], cwd=tuned)
    assert again.returncode == 0, again.stderr
    assert run_cli(["report", "s"], cwd=tuned).returncode == 0


@pytest.mark.parametrize("kept", ["x", {"hidden_size": 64}, {"model_type": 7}])
def test_a_kept_config_json_edited_by_hand_is_one_line_naming_the_study(
        tuned_hf: Path, tmp_path: Path, kept: Any) -> None:
    tuned = _copy(tuned_hf, tmp_path)
    files = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    _edit(tuned, {**files, "model.hf.config_file": kept})
    proc = run_cli(["trials", "s"], cwd=tuned)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("ipu-tune: error: model.hf.config_file=")
    assert "(as study 's' kept it): a Transformers config.json" in lines[0]


def test_a_kept_value_nested_past_pythons_recursion_is_one_line(
        tuned: Path, tmp_path: Path) -> None:
    """Optuna deep-copies a study's attributes on every read: a value nested 900 deep (a study
    edited by hand) ended `studies`, `report`, ... in a RecursionError traceback."""
    tuned = _copy(tuned, tmp_path)
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(900):
        inner["a"] = {}
        inner = inner["a"]
    files = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    _edit(tuned, {**files, "extra": nested})
    for argv in (["studies"], *_READERS):
        proc = run_cli(argv, cwd=tuned)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (argv, proc.stderr[-500:])
        assert "nests deeper than Python can copy (RecursionError)" in lines[0]


def test_a_kept_config_json_that_does_not_build_says_it_is_the_kept_copy(
        tuned_hf: Path, tmp_path: Path) -> None:
    """The file was never read: the error names the study's kept copy, not the file."""
    tuned = _copy(tuned_hf, tmp_path)
    files = dict(_study(tuned / "results").user_attrs["ipu_tune"]["files"])
    kept = {**files["model.hf.config_file"], "hidden_size": -64}
    _edit(tuned, {**files, "model.hf.config_file": kept})
    proc = run_cli(["trials", "s"], cwd=tuned)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "config.json (as the study kept it)" in lines[0]


@pytest.mark.parametrize(("key", "value"), [("objectives", 7), ("pinned", ["plan.x", 5, None]),
                                            ("num_ipus", "two"), ("model", ["x"])])
def test_a_study_field_of_another_type_is_one_line_naming_it(
        tuned: Path, tmp_path: Path, key: str, value: Any) -> None:
    """`objectives: 7` or a pin that is no key ended every command in a TypeError traceback."""
    tuned = _copy(tuned, tmp_path)
    study = _study(tuned / "results")
    study.set_user_attr("ipu_tune", {**study.user_attrs["ipu_tune"], key: value})
    for argv in (["studies"], *_READERS):
        proc = run_cli(argv, cwd=tuned)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (argv, proc.stderr[-400:])
        assert lines[0].startswith(f"ipu-tune: error: study='s': its stored ipu_tune.{key}=")


@pytest.mark.parametrize(("section", "edit", "needle"), [
    ("plan", {"gradient_accumulation": -3}, "plan.gradient_accumulation=-3"),
    ("plan", {"replicated_tensor_sharding": "yes"}, "plan.replicated_tensor_sharding"),
])
def test_a_stored_config_value_edited_out_of_range_is_refused_naming_the_study(
        tuned: Path, tmp_path: Path, section: str, edit: dict[str, Any], needle: str) -> None:
    """`report` read gradient accumulation -3 as a plan, and a refused value read as if typed
    on the command line: the stored config is checked as the tuner checked it."""
    tuned = _copy(tuned, tmp_path)
    meta = _study(tuned / "results").user_attrs["ipu_tune"]
    _edit(tuned, meta["files"], **{section: {**meta["config"][section], **edit}})
    for argv in _READERS:
        proc = run_cli(argv, cwd=tuned)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (argv, proc.stderr[-400:])
        assert lines[0].startswith("ipu-tune: error: study='s': its stored config: " + needle)
