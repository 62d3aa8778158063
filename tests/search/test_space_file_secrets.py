"""A space file given by mistake (`/etc/shadow`, a `.env`): its errors never echo its contents.

Such a file reads as a mapping or a list whose keys and items are its lines; every key is
named through `key_name` and every refused structure only by its type and size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ipu_tune.errors import IpuTuneError
from ipu_tune.search import load_space

SECRET = "root:$6$salt$hash:19000:0:99999:7:::"
_MB = "workload.micro_batch_size"
_GA = "plan.gradient_accumulation"

CASES: dict[str, dict[str, Any]] = {
    "unknown knob": {"knobs": {SECRET: None}},
    "unknown knob with modes": {"knobs": {SECRET: {"modes": ["train"]}}},
    "unknown spec key": {"knobs": {_MB: {SECRET: 1}}},
    "spec is a list": {"knobs": {"plan.precision": [SECRET]}},
    "modes a mapping": {"knobs": {"plan.precision": {"modes": {SECRET: 1}}}},
    "modes a list": {"knobs": {"plan.precision": {"modes": [SECRET]}}},
    "low a list": {"knobs": {_GA: {"low": [SECRET], "high": 4}}},
    "log a mapping": {"knobs": {_GA: {"low": 1, "high": 4, "log": {SECRET: 1}}}},
    "int choice a list": {"knobs": {_GA: {"choices": [[SECRET]]}}},
    "enum choice a mapping": {"knobs": {"plan.precision": {"choices": [{SECRET: 1}]}}},
    "io tiles choice a list": {"knobs": {"plan.io_tiles": {"choices": [[SECRET]]}}},
    "replicas choice a list": {"knobs": {"plan.replication_factor": {"choices": [[SECRET]]}}},
    "fixed a list": {"knobs": {_GA: {"low": 1, "high": 4}}, "fixed": [SECRET]},
    "constraints a list": {"knobs": {_GA: {"low": 1, "high": 4}}, "constraints": [SECRET]},
    "unknown constraint": {"knobs": {_GA: {"low": 1, "high": 4}}, "constraints": {SECRET: 1}},
    "keep a list": {"knobs": {_GA: {"low": 1, "high": 4}},
                    "constraints": {"keep_global_batch": [SECRET]}},
    "ratio a mapping": {"knobs": {_GA: {"low": 1, "high": 4}},
                        "constraints": {"throughput_floor_ratio": {SECRET: 1}}},
}


@pytest.mark.parametrize("document", CASES.values(), ids=CASES.keys())
def test_space_file_errors_never_echo_the_file(tmp_path: Path, document: dict[str, Any]) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(IpuTuneError) as info:
        load_space(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    told = message.replace(str(path), "")  # the path may hold `root` (pytest-of-root)
    assert "$6$" not in told and "salt" not in told and "root:" not in told


def test_scalar_bounds_are_still_shown(tmp_path: Path) -> None:
    # A bound the user typed is what they need to see to fix it.
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({"knobs": {_GA: {"low": "many", "high": 4}}}))
    with pytest.raises(IpuTuneError, match=r"knobs\.plan\.gradient_accumulation\.low: 'many'"):
        load_space(path)
