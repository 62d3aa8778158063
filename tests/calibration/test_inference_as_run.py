"""The C600 inference point of `points.yaml` is encoded as ByteMLPerf ran it (its IPU report,
bytedance/ByteMLPerf byte_mlperf/reports/IPU/, resnet50-torch-fp32 result-fp16): a test that
fails when the encoding departs from the documented facts."""

from __future__ import annotations

from ipu_tune.calibration import default_points
from ipu_tune.config import GENERATED
from ipu_tune.hardware import IPUS, MACHINES

POINT = "resnet50_inference_c600"


def test_c600_point_is_encoded_as_bytemlperf_ran_it() -> None:
    (point,) = [p for p in default_points() if p.name == POINT]
    cfg = point.config
    # ResNet-50 at ImageNet resolution; ByteMLPerf makes random inputs in host memory and the
    # runtime copies them to the IPU: no preprocessing, a host-device stream.
    assert cfg.model.name == "resnet50"
    assert list(cfg.model.input_shape) == [3, 224, 224] and cfg.model.num_classes == 1000
    assert cfg.model.dataset.name == GENERATED
    # One C600 card, inference at batch 32, 128 batches per step.
    assert (cfg.system.ipu, cfg.system.num_ipus) == ("c600", 1)
    assert cfg.workload.mode == "infer" and cfg.workload.micro_batch_size == 32
    plan = cfg.plan
    assert plan.device_iterations == 128 and plan.replication_factor == 1
    assert plan.pipeline.splits == []
    # FP16 with half partials, 8-bit input, 64 I/O tiles, AMP 0.6.
    assert (plan.precision, plan.partials) == ("16.16", "half")
    assert plan.eight_bit_io and plan.io_tiles == 64
    assert plan.available_memory_proportion == 0.6
    assert point.samples_per_s == 13542 and point.tolerance is not None
    assert point.tolerance <= 0.05


def test_c600_preset_is_one_mk2_chip_at_1_5_ghz_on_pcie_gen4_x16() -> None:
    c600, mk2 = IPUS["c600"], IPUS["mk2"]
    assert c600.clock_hz == 1.5e9
    assert (c600.tiles, c600.sram_bytes_per_tile) == (mk2.tiles, mk2.sram_bytes_per_tile)
    assert c600.fp16_flops_per_cycle_per_tile == mk2.fp16_flops_per_cycle_per_tile
    assert c600.host_link_bytes_per_s == 32e9  # PCIe Gen4 x16, one direction
    assert MACHINES["c600"].ipus_per_machine == 1 and MACHINES["c600"].in_server


# Single-IPU inference configurations Graphcore shipped and measured (points.yaml): the model,
# its input, the batch, and how its inference benchmarks ran them.
SHIPPED_INFERENCE = {
    "resnet50_inference_mk2_b80_fits": ("resnet50", None, 80),
    "bert_large_squad_sl128_inference_mk2_b18_fits": ("bert_large_squad", 128, 18),
}


def test_shipped_inference_configurations_are_encoded_as_graphcore_ran_them() -> None:
    points = {p.name: p for p in default_points()}
    for name, (model, sequence_length, batch) in SHIPPED_INFERENCE.items():
        point = points[name]
        cfg = point.config
        assert (cfg.model.name, cfg.model.sequence_length) == (model, sequence_length)
        assert cfg.model.dataset.name == "synthetic"  # made on the IPU: no host work
        assert (cfg.system.ipu, cfg.system.num_ipus) == ("mk2", 1)
        assert cfg.workload.mode == "infer" and cfg.workload.micro_batch_size == batch
        assert (cfg.plan.precision, cfg.plan.partials) == ("16.16", "half")
        assert cfg.plan.pipeline.splits == [] and cfg.plan.replication_factor == 1
        assert point.result == "fits" and point.samples_per_s is None
