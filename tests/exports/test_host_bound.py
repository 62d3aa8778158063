"""A host-bound plan's exports quote the figures `evaluate` does: the asynchronous loader's
host work a step against the device's (`ipu_tune.simulator.host_wait_clause`), not the
`host_preprocess` phase, which is only the device's wait and a small share of the step."""

from __future__ import annotations

import ipu_tune
from ipu_tune.cli.evaluate_format import format_result
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.exports import export_context, render_exports
from ipu_tune.simulator import host_wait_clause


def host_bound() -> EvalConfig:
    """The best plan of `model=resnet50 workload.mode=infer system.num_ipus=1`: ImageNet's
    4 ms of host work a sample outlasts the device."""
    return load_config({
        "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000,
                  "dataset": {"name": "imagenet", "sample_bytes": 110000,
                              "preprocess_s_per_sample": 0.004}},
        "workload": {"mode": "infer", "micro_batch_size": 11},
        "system": {"ipu": "mk2", "num_ipus": 1},
        "plan": {"precision": "16.16", "device_iterations": 4, "gradient_accumulation": 1,
                 "async_dataloader": True, "dataloader_workers": 32, "eight_bit_io": True,
                 "io_tiles": 32, "prefetch_depth": 3, "partials": "half",
                 "available_memory_proportion": 0.6},
    })  # fmt: skip


def flat(text: str) -> str:
    return " ".join(line.lstrip("# ") for line in text.splitlines())


def test_the_exports_of_a_host_bound_plan_quote_evaluates_host_and_device_figures() -> None:
    cfg = host_bound()
    profile = ipu_tune.profile(cfg.model)
    result = ipu_tune.evaluate_config(cfg)
    clause = host_wait_clause(result)
    # The plan is bound by the host although its host_preprocess phase is not the largest.
    assert result.bottleneck == "host_preprocess" and clause
    assert result.phases["host_preprocess"] < max(result.phases.values())
    assert f"({clause})" in format_result(result, cfg, profile.facts)
    texts = render_exports(export_context(cfg, result, profile))
    for name in ("poptorch", "tensorflow"):
        text = flat(texts[name])
        assert f"Simulated bottleneck host_preprocess: {clause}" in text, name
        # The phase's own share of the step is not called the bottleneck.
        assert "Simulated host_preprocess:" not in text, name
