"""The PopRun command line, and the exports written beside best.yaml."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import yaml

import ipu_tune
from ipu_tune.config import to_plain_dict
from ipu_tune.results import (
    EXPORT_FILES,
    best_yaml_text,
    poprun_command,
    poprun_provenance,
    write_exports,
)

from ._export_plans import PLANS, make_config

# PopRun flags (PopRun user guide, "PopRun features", framework-apis.md 4.1); no host-count flag.
POPRUN_FLAGS = {"--num-instances", "--num-replicas", "--ipus-per-replica", "--host"}


def _flags(command: str) -> dict[str, str]:
    words = shlex.split(command)
    assert words[0] == "poprun"
    flags: dict[str, str] = {}
    i = 1
    while words[i].startswith("--"):
        flags[words[i]] = words[i + 1]
        i += 2
    assert words[i:] == ["python", "train.py"]
    return flags


def test_single_instance_single_host_needs_no_poprun() -> None:
    assert poprun_command(make_config(PLANS["default-study"])) is None
    assert poprun_command(make_config(PLANS["pipelined-bert"])) is None
    assert poprun_provenance(make_config(PLANS["default-study"])) == {}


def test_multi_host_plan_lists_its_hosts_and_splits_replicas() -> None:
    cfg = make_config(PLANS["multi-host"])
    command = poprun_command(cfg)
    assert command is not None
    flags = _flags(command)
    assert set(flags) <= POPRUN_FLAGS and "--num-hosts" not in command
    assert flags == {
        "--num-instances": "4",
        "--num-replicas": "16",
        "--ipus-per-replica": "1",
        "--host": "host0,host1",
    }
    # PopRun splits replicas evenly among instances and instances evenly among hosts.
    assert 16 % 4 == 0 and 4 % len(flags["--host"].split(",")) == 0


def test_instances_on_one_host_take_no_host_list() -> None:
    raw = PLANS["multi-host"]
    cfg = make_config({**raw, "system": {**raw["system"], "hosts": 1}})
    assert _flags(poprun_command(cfg) or "") == {
        "--num-instances": "4",
        "--num-replicas": "16",
        "--ipus-per-replica": "1",
    }


def test_exports_are_written_beside_best_yaml_with_the_poprun_line(tmp_path: Path) -> None:
    cfg = make_config(PLANS["multi-host"])
    result = ipu_tune.evaluate(cfg)
    paths = write_exports(tmp_path, cfg, result, ipu_tune.profile(cfg.model))
    assert {k: p.name for k, p in paths.items()} == EXPORT_FILES
    for path in paths.values():
        text = path.read_text()
        ast.parse(text)
        assert "poprun --num-instances 4 --num-replicas 16 --ipus-per-replica 1" in text
    provenance = {"study": "s", "trial": 0, "evaluate": "x", **poprun_provenance(cfg)}
    best = yaml.safe_load(best_yaml_text(to_plain_dict(cfg), provenance))
    assert best["ipu_tune"]["poprun"] == poprun_command(cfg, "python poptorch_options.py")
    assert "placeholders" in best["ipu_tune"]["poprun_hosts"]
