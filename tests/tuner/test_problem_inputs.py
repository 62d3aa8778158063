"""What a config names but does not hold (a Transformers config.json, a factory's module, a
constants file) enters a study as what it is: edited in place, it is another problem. The
stored trials were scored on the old model or constants; resuming them would print an old
result for a new model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ipu_tune.__main__ import main
from ipu_tune.config import CONF_DIR, TuneConfig
from ipu_tune.config._load import typed
from ipu_tune.errors import IpuTuneError
from ipu_tune.tuner import RunSummary, prepare, run
from tests.conftest import REPO, run_cli

_BERT = {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 512}


def _run(results: Path, n: int, *extra: str) -> RunSummary:
    overrides = [f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
                 *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=overrides))
    return run(prepare(cfg))


def _write_config(folder: Path, **fields: int) -> None:
    # The same length each time: a rewrite keeps the file's size, as an editor's often does.
    text = json.dumps({**_BERT, **fields})
    (folder / "config.json").write_text(text)


def _hf(folder: Path) -> tuple[str, ...]:
    return ("model=hf", f"model.hf.config_file={folder}", "model.sequence_length=32")


def test_a_config_file_edited_in_place_is_another_default_study(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _write_config(folder, num_hidden_layers=2)
    first = _run(tmp_path / "results", 3, *_hf(folder))
    _write_config(folder, num_hidden_layers=4)
    capsys.readouterr()
    deeper = _run(tmp_path / "results", 3, *_hf(folder))
    # Before, the folder's unchanged stamp kept the old profile and the old study: "(0 run now)".
    assert deeper.study_name != first.study_name
    assert (deeper.n_complete, deeper.ran_here) == (3, 3)
    said = capsys.readouterr().err  # one line: why this run is not in the default study
    assert f"study {first.study_name!r} was run with another model (as profiled)" in said
    _write_config(folder, num_hidden_layers=6)
    third = _run(tmp_path / "results", 3, *_hf(folder))
    assert len({first.study_name, deeper.study_name, third.study_name}) == 3
    assert third.ran_here == 3
    _write_config(folder, num_hidden_layers=2)
    back = _run(tmp_path / "results", 5, *_hf(folder))
    assert back.study_name == first.study_name
    assert (back.n_complete, back.ran_here) == (5, 2)


def test_an_explicit_name_for_an_edited_config_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    _write_config(folder, num_hidden_layers=2)
    _run(tmp_path / "results", 2, *_hf(folder), "study.name=mine")
    _write_config(folder, num_hidden_layers=4)
    with pytest.raises(IpuTuneError) as err:
        _run(tmp_path / "results", 2, *_hf(folder), "study.name=mine")
    msg = str(err.value)
    assert "\n" not in msg and "study.name='mine'" in msg and "model (as profiled)" in msg


def test_a_constants_file_edited_in_place_is_another_study(tmp_path: Path) -> None:
    constants = tmp_path / "constants.yaml"
    constants.write_text("call_overhead_s: 0.020\n")
    first = _run(tmp_path / "results", 3, f"simulator.constants={constants}")
    constants.write_text("call_overhead_s: 0.040\n")
    other = _run(tmp_path / "results", 3, f"simulator.constants={constants}")
    assert other.study_name != first.study_name and other.ran_here == 3
    with pytest.raises(IpuTuneError, match=r"simulator\.constants \(values\)"):
        _run(tmp_path / "results", 3, f"simulator.constants={constants}",
             f"study.name={first.study_name}")


def test_a_factory_edited_in_place_is_another_study(tmp_path: Path) -> None:
    source = tmp_path / "my_factory.py"
    body = ("import torch.nn as nn\n\n\ndef model(**_kw: object) -> nn.Module:\n"
            "    return nn.Sequential(nn.Flatten(), nn.Linear(8, {width}), nn.ReLU(),\n"
            "                         nn.Linear({width}, 10))\n")
    args = [f"results_dir={tmp_path / 'results'}", "study.n_trials=2", "study.progress_bar=false",
            "system.num_ipus=1", "model._target_=my_factory.model", "model.input_shape=[8]"]
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    names = []
    for width in (64, 96):  # two digits: the file keeps its size
        source.write_text(body.format(width=width))
        done = run_cli(args, tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        names.append(next(line.split()[1] for line in done.stdout.splitlines()
                          if line.startswith("study ")))
        assert "(2 run now)" in done.stdout
    assert names[0] != names[1]


@pytest.mark.parametrize("command", ["report", "explain"])
def test_a_study_of_an_edited_model_is_explained_with_the_one_it_ran(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The study keeps the config.json it was tuned with: the file edited in place (4 layers
    where the trials ran 2) changes nothing its commands read."""
    folder = tmp_path / "model"
    folder.mkdir()
    _write_config(folder, num_hidden_layers=2)
    done = _run(tmp_path / "results", 2, *_hf(folder))
    _write_config(folder, num_hidden_layers=4)
    with pytest.raises(SystemExit) as exit_info:
        main([command, done.study_name, "--results-dir", str(tmp_path / "results")])
    assert exit_info.value.code == 0, capsys.readouterr().err


def test_a_space_file_edited_in_place_is_another_study(tmp_path: Path) -> None:
    space = tmp_path / "sp2.yaml"
    space.write_text("knobs:\n  plan.gradient_accumulation: {low: 1, high: 4}\n")
    first = _run(tmp_path / "results", 3, f"search.space={space}", "study.name=spst")
    # Other knobs, and every trial in inference: the stored trials trained.
    space.write_text("knobs:\n  plan.device_iterations: {low: 1, high: 8}\n"
                     "fixed: {workload.mode: infer}\n")
    with pytest.raises(IpuTuneError, match=r"study.name='spst'.*search\.space \(as read\)"):
        _run(tmp_path / "results", 6, f"search.space={space}", "study.name=spst")
    other = _run(tmp_path / "results", 3, f"search.space={space}")
    assert other.study_name != first.study_name
