"""The PopRun command line, the exporter registry, and the exports written beside best.yaml."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import yaml

import ipu_tune
from ipu_tune.config import EvalConfig
from ipu_tune.exports import (
    EXPORTERS,
    Provenance,
    export_context,
    poprun_command,
    render_exports,
    write_exports,
)

from ._export_plans import PLANS, make_config

# PopRun flags (PopRun user guide, "PopRun features"); no host-count flag.
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


def _command(cfg: EvalConfig) -> str | None:
    return poprun_command(export_context(cfg), "python train.py")


def test_single_instance_single_host_needs_no_poprun() -> None:
    assert _command(make_config(PLANS["default-study"])) is None
    assert _command(make_config(PLANS["pipelined-bert"])) is None
    texts = render_exports(export_context(make_config(PLANS["default-study"])))
    assert texts["poprun"] == ""
    assert "poprun" not in yaml.safe_load(texts["best"])["ipu_tune"]


def test_multi_host_plan_lists_its_hosts_and_splits_replicas() -> None:
    cfg = make_config(PLANS["multi-host"])
    command = _command(cfg)
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
    assert _flags(_command(cfg) or "") == {
        "--num-instances": "4",
        "--num-replicas": "16",
        "--ipus-per-replica": "1",
    }


def test_exports_are_written_beside_best_yaml_with_the_poprun_line(tmp_path: Path) -> None:
    cfg = make_config(PLANS["multi-host"])
    provenance = Provenance.of("s", 0, "journal", {"throughput": 1.0}, tmp_path)
    ctx = export_context(cfg, ipu_tune.evaluate(cfg), ipu_tune.profile(cfg.model), provenance)
    written = write_exports(ctx, tmp_path)
    files = {e.name: e.file_name for e in EXPORTERS
             if e.file_name is not None and e.applies(ctx)}
    assert {k: p.name for k, p in written.paths.items()} == files
    # A ResNet has no optimum-graphcore files (those are for Transformers models).
    assert list(files) == ["best", "poptorch", "popart", "tensorflow"]
    line = poprun_command(ctx)
    assert written.texts["poprun"] == f"{line}\n"
    for name, path in written.paths.items():
        text = path.read_text()
        assert text == written.texts[name]  # the file is the rendered text, byte for byte
        if name != "best":
            ast.parse(text)
            assert "poprun --num-instances 4 --num-replicas 16 --ipus-per-replica 1" in text
    best = yaml.safe_load(written.paths["best"].read_text())
    assert best["ipu_tune"]["poprun"] == line == poprun_command(ctx, "python poptorch_options.py")
    assert "placeholders" in best["ipu_tune"]["poprun_hosts"]
    assert best["ipu_tune"]["evaluate"] == provenance.evaluate
    assert provenance.evaluate.endswith(str(tmp_path / "best.yaml"))


def test_best_yaml_evaluates_to_the_exported_plan(tmp_path: Path) -> None:
    cfg = make_config(PLANS["multi-host"])
    result = ipu_tune.evaluate(cfg)
    ctx = export_context(cfg, result, None, Provenance.of("s", 3, "j", {}, tmp_path))
    path = write_exports(ctx, tmp_path).paths["best"]
    assert path.read_text().startswith("# ipu-tune best plan of study s, trial 3.\n")
    assert ipu_tune.evaluate(str(path)) == result
