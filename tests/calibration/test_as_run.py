"""Every released calibration point is encoded as Graphcore ran it.

The table below restates, per point, the facts its public record and configuration files give
(MLCommons training_results v1.1/v2.0 Graphcore ResNet-50 TF1 configs.yml and run_and_time.sh;
Graphcore's BERT PopART configs and performance results): a test fails when `points.yaml`
departs from any of them.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ipu_tune.calibration import CalibrationPoint, default_points

_RESNET50: dict[str, Any] = {
    "model": "resnet50", "precision": "16.16", "partials": "half", "eight_bit_io": True,
    "recompute": "checkpoints", "stages": 1, "optimizer": "momentum",
}
_BERT: dict[str, Any] = {
    "precision": "16.16", "partials": "half", "recompute": "every_block", "optimizer": "lamb",
    "offload_optimizer_state": True, "replicated_tensor_sharding": True, "schedule": "grouped",
}
# Facts per point: what the records state (hosts: one server per 16 IPUs; instances: replicas/2).
FACTS: dict[str, dict[str, Any]] = {
    "mlperf_resnet50_pod16": {**_RESNET50, "ipu": "mk2", "num_ipus": 16, "replicas": 16,
                              "micro_batch": 20, "ga": 10, "amp": 0.15, "hosts": 1,
                              "instances": 8},
    "mlperf_resnet50_pod64": {**_RESNET50, "ipu": "mk2", "num_ipus": 64, "replicas": 64,
                              "micro_batch": 20, "ga": 3, "hosts": 4, "instances": 32},
    "mlperf_resnet50_bow_pod16": {**_RESNET50, "ipu": "bow", "num_ipus": 16, "replicas": 16,
                                  "micro_batch": 22, "ga": 10, "amp": 0.15, "hosts": 1,
                                  "instances": 8},
    "bert_large_sl128_bow_pod16": {**_BERT, "model": "bert_large", "ipu": "bow", "num_ipus": 16,
                                   "replicas": 4, "micro_batch": 8, "ga": 2048, "amp": 0.25,
                                   "sequence_length": 128, "masked_positions": 20,
                                   "layers_per_ipu": [3, 7, 7, 7]},
    "bert_base_sl512_fits": {**_BERT, "model": "bert_base", "ipu": "mk2", "num_ipus": 16,
                             "replicas": 4, "micro_batch": 8, "ga": 512, "amp": 0.28,
                             "sequence_length": 512, "masked_positions": 76,
                             "layers_per_ipu": [0, 4, 4, 4]},
}
_LAYERS = {"bert_large": 24, "bert_base": 12}


def _layers_per_ipu(splits: list[str], layers: int) -> list[int]:
    """Encoder layers per IPU from the splits `encoder.layer.N` (the tied head and the embedding
    sit on IPU0 beside the layers before the first split)."""
    starts = [0, *(int(s.rsplit(".", 1)[1]) for s in splits), layers]
    return [b - a for a, b in itertools.pairwise(starts)]


def _encoded(p: CalibrationPoint) -> dict[str, Any]:
    cfg = p.config
    plan, w = cfg.plan, cfg.workload
    out: dict[str, Any] = {
        "model": cfg.model.name, "ipu": cfg.system.ipu, "num_ipus": cfg.system.num_ipus,
        "replicas": plan.replication_factor, "micro_batch": w.micro_batch_size,
        "ga": plan.gradient_accumulation, "amp": plan.available_memory_proportion,
        "precision": plan.precision, "partials": plan.partials, "recompute": plan.recompute,
        "optimizer": w.optimizer, "eight_bit_io": plan.eight_bit_io,
        "hosts": cfg.system.servers, "instances": plan.host_instances,
        "stages": len(plan.pipeline.splits) + 1, "schedule": plan.pipeline.schedule,
        "offload_optimizer_state": plan.offload_optimizer_state,
        "replicated_tensor_sharding": plan.replicated_tensor_sharding,
        "sequence_length": cfg.model.sequence_length,
        "masked_positions": cfg.model.kwargs.get("masked_positions"),
    }
    if cfg.model.name in _LAYERS:
        out["layers_per_ipu"] = _layers_per_ipu(list(plan.pipeline.splits),
                                                _LAYERS[cfg.model.name])
    return out


@pytest.fixture(scope="module")
def points() -> dict[str, CalibrationPoint]:
    return {p.name: p for p in default_points()}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_point_is_encoded_as_run(points: dict[str, CalibrationPoint], name: str) -> None:
    encoded = _encoded(points[name])
    wrong = {k: (encoded[k], v) for k, v in FACTS[name].items() if encoded[k] != v}
    assert not wrong, f"{name}: (encoded, as run) {wrong}"


def test_layers_per_ipu_reads_splits() -> None:
    assert _layers_per_ipu(["encoder.layer.3", "encoder.layer.10", "encoder.layer.17"], 24) == [
        3, 7, 7, 7]
    assert _layers_per_ipu(["encoder.layer.0", "encoder.layer.4", "encoder.layer.8"], 12) == [
        0, 4, 4, 4]
