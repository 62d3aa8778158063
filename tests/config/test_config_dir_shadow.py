"""A file of a --config-dir named as a built-in option (or as the primary config) would be
ignored without a word: Hydra searches the package's folder first. It is refused in one line
naming the file and what it shadows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.config import check_side_doors
from ipu_tune.errors import IpuTuneError
from tests.conftest import run_cli


@pytest.mark.parametrize(("rel", "says"), [
    ("model/resnet101.yaml", "shadows the built-in option model=resnet101"),
    ("search/throughput.yaml", "shadows the built-in option search=throughput"),
    ("experiment/seed_mnist.yaml", "shadows the built-in option experiment=seed_mnist"),
    ("config.yaml", "shadows the built-in primary config config.yaml"),
])
def test_a_file_named_as_a_built_in_option_is_refused(rel: str, says: str,
                                                      tmp_path: Path) -> None:
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text("{}\n")
    with pytest.raises(IpuTuneError, match=says) as info:
        check_side_doors(["--config-dir", str(tmp_path), "model=resnet101"], trusted=False)
    assert str(tmp_path / rel) in str(info.value) and "allowed: " in str(info.value)


def test_a_file_of_its_own_name_is_taken(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "my_resnet101.yaml").write_text("name: resnet101\n")
    check_side_doors(["--config-dir", str(tmp_path), "model=my_resnet101"], trusted=False)


def test_the_command_refuses_a_shadowing_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "cd" / "model").mkdir(parents=True)
    (tmp_path / "cd" / "model" / "resnet101.yaml").write_text("name: resnet50\n")
    proc = run_cli(["--config-dir", "cd", "model=resnet101", "study.n_trials=1"], cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cd/model/resnet101.yaml" in proc.stderr and "built-in option" in proc.stderr
    assert not (tmp_path / "results").exists()
