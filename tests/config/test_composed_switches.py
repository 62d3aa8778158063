"""A switch takes true or false wherever the composition reads it: a file a `defaults:` list
pulls in (at any depth, in any group), an experiment, an interpolation. Hydra composes the
switches untyped; `typed` checks the composed config once before OmegaConf types it (OmegaConf
reads 2, 1, "yes" or "on" as true)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ipu_tune.config import CONF_DIR, compose
from ipu_tune.errors import IpuTuneError
from tests.conftest import run_cli


def _conf(tmp_path: Path, value: str, key: str = "plan.eight_bit_io") -> Path:
    """conf/ plus an experiment whose defaults pull in a file whose defaults set `key`."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    section, _, name = key.rpartition(".")
    for group in ("inner", "outer"):
        (conf / group).mkdir()
    (conf / "inner" / "bits.yaml").write_text(
        f"# @package _global_\n{section}:\n  {name}: {value}\n")
    (conf / "outer" / "bits.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /inner: bits\n")
    (conf / "experiment" / "nested.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /outer: bits\nstudy: {n_trials: 2}\n")
    return conf


@pytest.mark.parametrize(("value", "shown"), [
    # (Unquoted, yes and on are YAML 1.1's true in Hydra's loader; `read_yaml` refuses them.)
    ("2", "2"), ("1", "1"), ("0", "0"), ("'yes'", "'yes'"), ("'on'", "'on'"), ("'true'", "'true'"),
    ("1.0", "1.0"), ("[true]", "[True]"), ("{a: 1}", "{'a': 1}"),
])
def test_a_switch_two_defaults_lists_deep_is_checked(tmp_path: Path, value: str,
                                                     shown: str) -> None:
    conf = _conf(tmp_path, value)
    with pytest.raises(IpuTuneError) as info:
        compose(["+experiment=nested"], conf)
    assert str(info.value) == f"plan.eight_bit_io={shown}: allowed: true or false"


@pytest.mark.parametrize("key", ["study.progress_bar", "search.warm_start",
                                 "sampler.local_search", "plan.async_dataloader"])
def test_every_switch_section_is_checked(tmp_path: Path, key: str) -> None:
    conf = _conf(tmp_path, "2", key)
    with pytest.raises(IpuTuneError, match=rf"^{key}=2: allowed: true or false$"):
        compose(["+experiment=nested"], conf)


def test_a_switch_in_a_group_option_is_checked(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "true")
    (conf / "model" / "mine.yaml").write_text(
        "defaults:\n  - resnet50\n  - /inner@_global_: bits\n  - _self_\n")
    (conf / "inner" / "bits.yaml").write_text("# @package _global_\nplan: {eight_bit_io: 'yes'}\n")
    with pytest.raises(IpuTuneError, match=r"^plan.eight_bit_io='yes': allowed: true or false$"):
        compose(["model=mine"], conf)


def test_true_and_false_still_compose(tmp_path: Path) -> None:
    assert compose(["+experiment=nested"], _conf(tmp_path, "true")).plan.eight_bit_io is True
    assert compose(["+experiment=nested"], _conf(tmp_path / "f", "false")).plan.eight_bit_io is (
        False)


def test_a_switch_set_by_an_interpolation_is_checked_resolved() -> None:
    with pytest.raises(IpuTuneError, match=r"^plan.eight_bit_io='\$\{study.n_trials\}' "
                                           r"\(resolves to 100\): allowed: true or false$"):
        compose(["plan.eight_bit_io=${study.n_trials}"])
    cfg = compose(["plan.offload_optimizer_state=true",
                   "plan.eight_bit_io=${plan.offload_optimizer_state}"])
    assert cfg.plan.eight_bit_io is True


def test_cli_refuses_a_nested_switch_of_a_config_dir(tmp_path: Path) -> None:
    folder = tmp_path / "cd"
    (folder / "experiment").mkdir(parents=True)
    (folder / "bits").mkdir()
    (folder / "experiment" / "x.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /bits: eight\nstudy: {n_trials: 2}\n")
    (folder / "bits" / "eight.yaml").write_text("# @package _global_\nplan: {eight_bit_io: 2}\n")
    out = run_cli(["--config-dir", str(folder), "+experiment=x",
                   f"results_dir={tmp_path / 'res'}"], cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == "ipu-tune: error: plan.eight_bit_io=2: allowed: true or false"
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "res").exists()


def test_cli_refuses_a_yaml_1_1_word_for_a_switch_in_a_config_dir(tmp_path: Path) -> None:
    """`eight_bit_io: yes` in a --config-dir file ran with the switch on (OmegaConf's loader
    reads YAML 1.1's yes as true); the command line refuses `plan.eight_bit_io=yes`."""
    folder = tmp_path / "cd"
    (folder / "experiment").mkdir(parents=True)
    (folder / "experiment" / "x.yaml").write_text(
        "# @package _global_\nplan: {eight_bit_io: yes}\nstudy: {n_trials: 2}\n")
    out = run_cli(["--config-dir", str(folder), "+experiment=x", "model=mnist_cnn",
                   f"results_dir={tmp_path / 'res'}"], cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"ipu-tune: error: config file "
                                 f"'{folder / 'experiment' / 'x.yaml'}': plan.eight_bit_io='yes': "
                                 "YAML reads an unquoted yes/no/on/off as a boolean")
    assert out.stderr.count("\n") == 1 and not (tmp_path / "res").exists()
