"""A latency search runs every trial in inference: an ipu_config.json it starts from is read
for its inference fields (`inference_device_iterations`, ...), the user's plan is the file's
inference plan, and the summary compares latency per call, not samples/s. The training fields
it did not read are carried into the export."""

from __future__ import annotations

import json
from pathlib import Path

from hydra import compose, initialize_config_dir

from ipu_tune.cli._summary import format_summary
from ipu_tune.cli.run import pinned_keys
from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.tuner import prepare, run

_FILE = {"layers_per_ipu": [-1], "ipus_per_replica": 2, "matmul_proportion": 0.25,
         "gradient_accumulation_steps": 32, "inference_device_iterations": 8}


def _cfg(tmp_path: Path, *extra: str) -> tuple[TuneConfig, frozenset[str]]:
    (tmp_path / "ipu_config.json").write_text(json.dumps(_FILE))
    overrides = ["model=hf", "model.hf.model_type=bert",
                 "model.hf.config={num_hidden_layers: 2}", "system.num_ipus=2",
                 f"plan.from_ipu_config={tmp_path}", "search=latency", "study.n_trials=6",
                 "study.progress_bar=false", f"results_dir={tmp_path / 'r'}", *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=overrides))
    return cfg, pinned_keys(overrides)


def test_the_file_is_read_for_the_mode_the_search_runs(tmp_path: Path) -> None:
    prepared = prepare(*_cfg(tmp_path))
    assert prepared.cfg.workload.mode == "infer"
    assert prepared.cfg.plan.device_iterations == 8  # the file's inference field
    assert "gradient_accumulation_steps" in (prepared.cfg.plan.ipu_config_carried or {})
    summary = run(prepared)
    best = next(x for x in format_summary(summary).splitlines() if x.startswith("best:"))
    assert "x your plan's latency per call (" in best and "samples/s;" not in best, best


def test_a_mode_given_on_the_command_line_is_kept(tmp_path: Path) -> None:
    """Pinned, the mode is the user's: the latency objective then refuses training."""
    import pytest

    from ipu_tune.errors import IpuTuneError

    with pytest.raises(IpuTuneError, match="the latency objective times inference"):
        prepare(*_cfg(tmp_path, "workload.mode=train"))
