"""End to end: the main command's `search=throughput` on a host-bound POD16 raises
`plan.host_instances`; the run summary and best.yaml carry the matching PopRun line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import ipu_tune
from ipu_tune.cli.run import hydra_main
from ipu_tune.config import load_config
from ipu_tune.exports import export_context, poprun_command

# ResNet-50 at 224x224 with a costly host pipeline (4 ms per image on one core): one PopRun
# instance feeds about a quarter of what 16 IPUs consume (tests/search/test_host_instances.py).
HOST_BOUND = ("model=resnet50", "system=pod16", "search=throughput",
              "workload.micro_batch_size=16", "model.dataset.preprocess_s_per_sample=0.004",
              "plan.replication_factor=16", "plan.precision=16.16")
POPRUN = re.compile(r"^PopRun[^:]*: (poprun --num-instances (\d+) --num-replicas (\d+) "
                    r"--ipus-per-replica (\d+) .*)$", re.MULTILINE)


def test_throughput_search_on_a_host_bound_pod16_prints_its_poprun_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = hydra_main([*HOST_BOUND, f"results_dir={tmp_path}", "study.n_trials=60",
                       "study.progress_bar=false", "study.name=host_bound"])
    assert code == 0
    out = capsys.readouterr().out
    match = POPRUN.search(out)
    assert match is not None, out
    line, instances, replicas, per_replica = match.groups()

    best_yaml = tmp_path / "host_bound" / "best.yaml"
    exported = yaml.safe_load(best_yaml.read_text())
    plan = exported["plan"]
    assert plan["host_instances"] > 1  # the search raised it above the user's one instance
    assert int(instances) == plan["host_instances"]
    assert int(replicas) == plan["replication_factor"] == 16
    assert int(per_replica) == len(plan["pipeline"]["splits"]) + 1
    assert exported["ipu_tune"]["poprun"] == line
    # The line is the best plan's, and that plan beats one instance of itself.
    cfg = load_config(best_yaml)
    assert poprun_command(export_context(cfg), "python poptorch_options.py") == line
    best = ipu_tune.evaluate_config(cfg)
    one = ipu_tune.evaluate_config(load_config(
        {**{k: v for k, v in exported.items() if k != "ipu_tune"},
         "plan": {**plan, "host_instances": 1}}))
    assert best.fits and best.extras["host_instances"] == plan["host_instances"]
    assert one.throughput < best.throughput
