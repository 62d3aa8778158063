"""Every zoo model, with its preset's defaults, finds a fitting plan on a system it fits on.

The system per model is the one docs/first-run.md names: the smallest IPU-POD where
Graphcore's own runs of the model (or of its family) fit with the preset's micro-batch.
"""

from __future__ import annotations

from pathlib import Path

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
}


def test_every_zoo_model_has_a_documented_system() -> None:
    assert set(ZOO) <= set(SYSTEMS), sorted(set(ZOO) - set(SYSTEMS))
    doc = (Path(__file__).resolve().parents[2] / "docs" / "first-run.md").read_text()
    for name, system in SYSTEMS.items():
        assert f"`model={name} system={system}`" in doc, name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_zoo_model_with_its_defaults_finds_a_fitting_plan(name: str, tmp_path: Path) -> None:
    cfg = compose([f"model={name}", f"system={SYSTEMS[name]}", f"results_dir={tmp_path}",
                   "study.n_trials=24", "study.progress_bar=false"])
    summary = run(cfg)
    assert summary.best_result is not None, f"{name}: no plan fits on {SYSTEMS[name]}"
    r = summary.best_result
    assert r.fits and max(r.memory_per_ipu) <= r.memory_limit_bytes
    assert summary.best_config is not None
    # The micro-batch is searched at or below the preset's, never above.
    assert summary.best_config.workload.micro_batch_size <= cfg.workload.micro_batch_size
