"""End to end: tune a Transformers model, export ipu_config.json, start again from it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import transformers
from hydra import compose, initialize_config_dir

from ipu_tune._api import evaluate_config
from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.exports import apply_ipu_config, render_ipu_config
from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config
from ipu_tune.tuner import run
from tests.exports.test_ipu_config import fits, ipu_config_signature

pytestmark = pytest.mark.slow


def _cfg(results: Path, *overrides: str) -> TuneConfig:
    base = [f"results_dir={results}", "study.n_trials=40", "study.progress_bar=false",
            "system=pod16"]  # fmt: skip
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[*base, *overrides]))


def _tune_export_reimport(tmp_path: Path, *overrides: str) -> None:
    summary = run(_cfg(tmp_path, *overrides))
    best = summary.best_config
    assert best is not None, "no plan fits"
    result = evaluate_config(best)
    assert result.fits
    plan, profile = plan_from_config(best), profile_model(best.model)
    # The tuner writes ipu_config.json beside best.yaml: the best plan's, rendered once.
    file = summary.exports["ipu_config"]
    assert file == summary.exports["best"].parent / "ipu_config.json"
    assert (file.parent / "run_with_optimum.py").is_file()
    text = file.read_text()
    assert text == render_ipu_config(plan, profile, best)
    signature = ipu_config_signature()
    data = json.loads(text)
    assert set(data) <= set(signature)
    assert all(fits(v, signature[k]) for k, v in data.items())
    # Start again from the file over the defaults of the same command.
    again = apply_ipu_config(_cfg(tmp_path / "again", *overrides,
                                  f"plan.from_ipu_config={file}"))  # fmt: skip
    restarted = plan_from_config(again)
    carried = ("splits", "replication_factor", "gradient_accumulation", "device_iterations",
               "available_memory_proportion", "partials", "offload_optimizer_state",
               "replicated_tensor_sharding")  # fmt: skip
    assert {k: getattr(restarted, k) for k in carried} == {k: getattr(plan, k) for k in carried}
    # What IPUConfig does not carry (micro-batch, host side) comes from the command and the
    # precision is optimum's fp16 default; with the best's values for those, the simulator gives
    # the best's result back.
    same = replace(restarted, **{k: getattr(plan, k) for k in (
        "micro_batch_size", "precision", "prefetch_depth", "io_tiles", "async_dataloader",
        "dataloader_workers", "host_instances", "schedule", "eight_bit_io", "recompute")})
    assert same == plan


def test_gpt2_medium_causal_lm_on_pod16_tunes_exports_and_reimports(tmp_path: Path) -> None:
    _tune_export_reimport(tmp_path, "model=gpt2_medium", "model.sequence_length=1024")


def test_bert_large_config_file_on_pod16_tunes_exports_and_reimports(tmp_path: Path) -> None:
    config = transformers.BertConfig(hidden_size=1024, num_hidden_layers=24,
                                     num_attention_heads=16, intermediate_size=4096)
    folder = tmp_path / "bert-large-uncased"
    folder.mkdir()
    (folder / "config.json").write_text(config.to_json_string())
    _tune_export_reimport(tmp_path, "model=hf", f"model.hf.config_file={folder}/config.json",
                          "model.sequence_length=128", "workload.micro_batch_size=8")
