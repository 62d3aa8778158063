"""Every zoo model, with its preset's defaults, finds a fitting plan on a system it fits on.

The system per model is the one docs/first-run.md names (pod4, pod16, pod64, pod128, pod256);
for the EfficientNet, GPT-2 and Hugging Face presets, the smallest on which 24 trials find a
fitting plan with the preset's micro-batch (GPT-2 XL: with the default budget of 100 trials,
since only the sharded schedule fits it, at global batch 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ipu_tune.config import compose
from ipu_tune.models import ZOO
from ipu_tune.tuner import run

# Model -> the IPU-POD it is documented to fit on (docs/first-run.md).
SYSTEMS = {
    "mnist_cnn": "pod4",
    "resnet18": "pod4",
    "resnet34": "pod4",
    "resnet50": "pod4",
    "resnet101": "pod4",
    "resnet152": "pod4",
    "resnext50_32x4d": "pod4",
    "resnext101_32x8d": "pod4",
    "vit_b_16": "pod4",
    "bert_base": "pod4",
    "bert_large": "pod16",
    "bert_base_squad": "pod4",
    "bert_large_squad": "pod4",
    "efficientnet_b0": "pod4",
    "efficientnet_b1": "pod4",
    "efficientnet_b2": "pod4",
    "efficientnet_b3": "pod4",
    "efficientnet_b4": "pod4",
    "gpt2": "pod4",
    "gpt2_medium": "pod16",
    "gpt2_large": "pod64",
    "gpt2_xl": "pod16",
    "hf": "pod4",  # the Hugging Face preset needs a model type (EXTRA)
}
# Keys a line of the table adds to the preset's defaults.
EXTRA = {"hf": ["model.hf.model_type=gpt2"]}
# Trials per model where 24 are too few (the default budget is 100).
TRIALS = {"gpt2_xl": 100}


def _line(name: str, system: str, extra: list[str]) -> str:
    return "`" + " ".join([f"model={name}", f"system={system}", *extra]) + "`"


def test_every_zoo_model_has_a_documented_system() -> None:
    assert set(ZOO) <= set(SYSTEMS), sorted(set(ZOO) - set(SYSTEMS))
    doc = (Path(__file__).resolve().parents[2] / "docs" / "first-run.md").read_text()
    for name, system in SYSTEMS.items():
        assert _line(name, system, EXTRA.get(name, [])) in doc, name


def _run(name: str, system: str, extra: list[str], tmp_path: Path) -> tuple[Any, Any]:
    cfg = compose([f"model={name}", f"system={system}", f"results_dir={tmp_path}",
                   f"study.n_trials={TRIALS.get(name, 24)}", "study.progress_bar=false", *extra])
    return cfg, run(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_zoo_model_with_its_defaults_finds_a_fitting_plan(name: str, tmp_path: Path) -> None:
    cfg, summary = _run(name, SYSTEMS[name], EXTRA.get(name, []), tmp_path)
    assert summary.best_result is not None, f"{name}: no plan fits on {SYSTEMS[name]}"
    r = summary.best_result
    assert r.fits and max(r.memory_per_ipu) <= r.memory_limit_bytes
    assert summary.best_config is not None
    # The micro-batch is searched at or below the preset's, never above.
    assert summary.best_config.workload.micro_batch_size <= cfg.workload.micro_batch_size
