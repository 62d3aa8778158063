"""`build_case`: where a config meets its model. PopTorch's pipeline rule is checked there once
more, counting the stage a tied head placed on IPU0 adds (every export runs it as a stage of
its own), which the config's own check, before the model is profiled, cannot see."""

from __future__ import annotations

import pytest

from ipu_tune.case import build_case
from ipu_tune.config import load_config
from ipu_tune.errors import IpuTuneError

_SPLITS = ["encoder.layer.3", "encoder.layer.6", "encoder.layer.9"]


def _cfg(model: str, mode: str, count: int, splits: list[str]) -> dict:
    key = "gradient_accumulation" if mode == "train" else "device_iterations"
    return {"model": {"name": model}, "workload": {"mode": mode, "micro_batch_size": 1},
            "system": {"num_ipus": len(splits) + 1},
            "plan": {key: count, "pipeline": {"splits": splits}}}


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_a_tied_head_on_ipu0_is_a_pipeline_stage_of_its_own(mode: str) -> None:
    key = "gradient_accumulation" if mode == "train" else "device_iterations"
    with pytest.raises(IpuTuneError, match=rf"plan\.{key}=4: must be >= 5, the pipeline "
                       r"stages: 4 and the tied head `cls`"):
        build_case(load_config(_cfg("bert_base", mode, 4, _SPLITS)))
    assert build_case(load_config(_cfg("bert_base", mode, 5, _SPLITS))).plan.stages == 4


def test_a_model_without_a_tied_head_needs_its_stages_only() -> None:
    splits = ["layer2.0", "layer3.0", "layer4.0"]
    assert build_case(load_config(_cfg("resnet50", "train", 4, splits))).plan.stages == 4
