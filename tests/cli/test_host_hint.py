"""The summary says when the host's data pipeline bounds the best plan, and how to say the host
does less (benchmark inputs made or held ready, or the user's own pipeline's cost)."""

from __future__ import annotations

from typing import Any

from ipu_tune import evaluate_config
from ipu_tune.cli._summary import _host_hint
from ipu_tune.config import load_config


def _config(dataset: dict[str, Any]) -> Any:
    return load_config({
        "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000,
                  "dataset": dataset},
        "workload": {"mode": "infer", "micro_batch_size": 20},
        "system": {"ipu": "mk2", "num_ipus": 1},
        "plan": {"precision": "16.16", "partials": "half", "device_iterations": 64,
                 "async_dataloader": True, "dataloader_workers": 16, "eight_bit_io": True},
    })


def test_a_host_bound_inference_plan_names_the_host_cost_and_the_ways_out() -> None:
    cfg = _config({"name": "imagenet", "preprocess_s_per_sample": 0.004})
    result = evaluate_config(cfg)
    assert result.bottleneck == "host_preprocess"
    (line,) = _host_hint(result, cfg)
    assert "dataset imagenet, 4.000 ms of host work per sample" in line
    assert "model.dataset.name=generated" in line and "synthetic" in line
    assert "model.dataset.preprocess_s_per_sample=SECONDS" in line


def test_benchmark_inputs_or_a_device_bound_plan_need_no_hint() -> None:
    for dataset in ({"name": "synthetic"}, {"name": "generated"},
                    {"name": "imagenet", "preprocess_s_per_sample": 1e-6}):
        cfg = _config(dataset)
        result = evaluate_config(cfg)
        assert result.bottleneck != "host_preprocess"
        assert _host_hint(result, cfg) == []
