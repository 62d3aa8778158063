"""The files Hydra may read while ipu-tune composes (`ipu_tune.config._sources`): a route the
command-line and defaults checks did not foresee (a search path added behind them) is still
refused when Hydra reaches the file, and a --config-dir is walked as Hydra reads it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException

from ipu_tune.config import CONF_DIR, guarded_loads, hydra_error, register
from ipu_tune.config._sources import MAX_ENTRIES, config_files, header_package, vet
from ipu_tune.errors import IpuTuneError


def _compose(overrides: list[str]) -> object:
    register()
    with guarded_loads(CONF_DIR), initialize_config_dir(version_base="1.3",
                                                        config_dir=str(CONF_DIR)):
        return compose(config_name="config", overrides=overrides)


def test_hydra_reads_no_path_with_dots_even_unchecked(tmp_path: Path) -> None:
    (tmp_path / "cb.yaml").write_text("hydra: {callbacks: {x: {_target_: os.system}}}\n")
    up = os.path.relpath(tmp_path / "cb", CONF_DIR / "experiment")
    with pytest.raises(IpuTuneError, match=r"'\.\.' in a config path"):
        _compose([f"+experiment={up}"])


def test_hydra_reads_no_file_of_a_search_path_no_check_read(tmp_path: Path) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "cb.yaml").write_text("# @package _global_\n{}\n")
    with pytest.raises(IpuTuneError, match="a file no check has read"):
        _compose([f"hydra.searchpath=[file://{tmp_path}]", "+experiment=cb"])
    cb = tmp_path / "experiment" / "cb.yaml"
    vet({cb: cb.read_text()})  # once checked, it is read
    assert _compose([f"hydra.searchpath=[file://{tmp_path}]", "+experiment=cb"])


def test_a_file_changed_after_its_check_is_not_read(tmp_path: Path) -> None:
    """Hydra is given the text that was checked or nothing: a file swapped between the check
    and the composition (a shared folder) cannot bring in what the check refuses."""
    (tmp_path / "experiment").mkdir()
    cb = tmp_path / "experiment" / "cb.yaml"
    cb.write_text("# @package _global_\n{}\n")
    vet({cb: cb.read_text()})
    cb.write_text("# @package hydra\noutput_subdir: /tmp/elsewhere\n")
    with pytest.raises(IpuTuneError, match="changed after it was checked"):
        _compose([f"hydra.searchpath=[file://{tmp_path}]", "+experiment=cb"])


@pytest.mark.parametrize("header", ["#@package hydra", "#   @package hydra", "  #@package hydra",
                                    "# @package _global_.hydra"])
def test_a_header_is_read_as_hydra_reads_it(header: str) -> None:
    assert "hydra" in header_package(f"{header}\nrun: {{dir: /tmp/x}}\n", Path("x.yaml"))


def test_the_walk_follows_linked_folders_and_stops_early(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x.yaml").write_text("{}\n")
    (tmp_path / "cd").mkdir()
    os.symlink(tmp_path / "out", tmp_path / "cd" / "experiment")
    os.symlink(tmp_path / "cd", tmp_path / "cd" / "loop")  # a loop is not walked again
    assert config_files(tmp_path / "cd") == [tmp_path / "cd" / "experiment" / "x.yaml"]
    for i in range(MAX_ENTRIES + 1):
        (tmp_path / "out" / f"{i}.txt").touch()
    with pytest.raises(IpuTuneError, match="allowed: a folder of config groups"):
        config_files(tmp_path / "cd")


def test_hydras_blocklist_is_one_whole_line() -> None:
    exc = InstantiationException(
        "Target 'os.system' is blocklisted because it allows\nconfig data to control "
        "executable behavior or belongs to an\nexecution-capable target family.\n"
        "full_key: hydra.callbacks.x")
    line = str(hydra_error(exc))
    assert line.startswith("hydra.callbacks.x='os.system': ") and "allowed:" in line, line
    assert "\n" not in line
