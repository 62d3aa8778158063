"""Config defaults ipu-tune fills in: a timm ResNet backbone without timm trains what timm's
would (the stages after the first), in every DETR-family model that substitutes it."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
import torch

from ipu_tune.models._hf import build_hf
from ipu_tune.models._hf_meta import transformers_on_meta
from tests.models.conftest import model_cfg

pytestmark = pytest.mark.skipif(importlib.util.find_spec("timm") is not None,
                                reason="with timm installed, its own backbone is built")

SMALL_DETR = {"encoder_layers": 1, "decoder_layers": 1}
# timm's stages `layer2`..`layer4`, which DETR's `DetrConvEncoder` leaves trained
# (modeling_detr.py), as Transformers' ResNet names them.
TRAINED = ("encoder.stages.1.", "encoder.stages.2.", "encoder.stages.3.")


def _backbone_trained(model_type: str) -> dict[str, bool]:
    """{name in the backbone: requires_grad} of `model_type`'s model as ipu-tune builds it."""
    cfg = model_cfg(name="hf", hf={"model_type": model_type, "config": SMALL_DETR})
    with transformers_on_meta(), torch.device("meta"):
        runner, _, _ = build_hf(cfg)
    found = [(n, m) for n, m in runner.named_modules() if type(m).__name__ == "ResNetBackbone"]
    assert len(found) == 1, [n for n, _ in found]
    return {n: w.requires_grad for n, w in found[0][1].named_parameters()}


@pytest.mark.parametrize("model_type", ["detr", "conditional_detr", "deformable_detr",
                                        "table-transformer"])
def test_a_detr_substitute_backbone_trains_timms_later_stages(model_type: str) -> None:
    trained = _backbone_trained(model_type)
    assert any(n.startswith("embedder.") for n in trained)  # the stem is there, frozen
    assert trained == {n: n.startswith(TRAINED) for n in trained}


def test_a_model_that_freezes_no_backbone_weight_keeps_them_all_trained() -> None:
    # DAB-DETR's `DabDetrConvEncoder` freezes nothing (modeling_dab_detr.py), timm's or not.
    assert all(_backbone_trained("dab-detr").values())


def test_detrs_profile_has_backward_work_in_the_later_stages_only(profile_of: Any) -> None:
    profile = profile_of(name="hf", hf={"model_type": "detr", "config": SMALL_DETR})
    stages = [b for b in profile.block_stats if ".encoder.stages." in b.name]
    assert stages
    for block in stages:
        later = not block.name.split(".encoder.stages.", 1)[1].startswith("0")
        assert (block.backward_flops > 0) is later, block.name
        assert (block.saved_elements > 0) is later, block.name
