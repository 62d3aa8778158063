"""An unknown key is refused in one line naming the keys its section allows, and the section
that has it when it was written under another: in a file and on the command line alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.config import load_config
from ipu_tune.errors import IpuTuneError
from tests.conftest import run_cli

_LINE = ("plan.micro_batch_size: unknown key (it is a key of workload: "
         "workload.micro_batch_size); allowed in plan: async_dataloader,")


def test_a_key_under_the_wrong_section_names_the_right_one(tmp_path: Path) -> None:
    with pytest.raises(IpuTuneError) as info:
        load_config({"plan": {"micro_batch_size": 3}})
    assert str(info.value).startswith(_LINE)
    (tmp_path / "f.yaml").write_text("plan: {micro_batch_size: 3}\n")
    for args in (["evaluate", str(tmp_path / "f.yaml")],
                 ["plan.micro_batch_size=3", f"results_dir={tmp_path / 'r'}"]):
        proc = run_cli(args, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.startswith(f"ipu-tune: error: {_LINE}"), (
            proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_nested_unknown_key_names_its_own_section() -> None:
    with pytest.raises(IpuTuneError, match=r"^plan\.pipeline\.foo: unknown key; allowed in "
                                           r"plan\.pipeline: schedule, splits$"):
        load_config({"plan": {"pipeline": {"foo": 1}}})


@pytest.mark.parametrize("text", ["study.name=a\nb", "study.name=a\tb", "plan.io_tiles=3\x1b2"])
def test_an_override_with_a_control_character_is_refused_as_written(
        text: str, tmp_path: Path) -> None:
    proc = run_cli([text, f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert proc.returncode == 2 and "control character" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "a b" not in proc.stderr
