"""Inference as an inference graph runs it: the call's overhead its own (not the training fit),
device iterations amortising only that, synthetic data costing the host nothing (generated data
its copies only), memory without training's state, batch norm folded into the convolutions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.config import GENERATED, SYNTHETIC, DatasetConfig, ModelConfig
from ipu_tune.hardware import make_system
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import DEFAULT_CONSTANTS, simulate
from ipu_tune.simulator._inference import inference_graph  # the unit under test

ONE = make_system("mk2", 1)
C600 = make_system("c600", 1)
# Synthetic-data inference as Graphcore benchmarks it: FP16.16, half partials, 8-bit input.
INFER = ExecutionPlan(mode="infer", micro_batch_size=1, precision="16.16", partials="half",
                      eight_bit_io=True, device_iterations=1)


@pytest.fixture(scope="module")
def resnet50_synthetic() -> ModelProfile:
    return profile_model(ModelConfig(name="resnet50", input_shape=[3, 224, 224],
                                     num_classes=1000, dataset=DatasetConfig(name=SYNTHETIC)))


@pytest.fixture(scope="module")
def bert_large() -> ModelProfile:
    # Graphcore's BERT runs the MLM head on the masked tokens only: 20 at sequence length 128.
    return profile_model(ModelConfig(name="bert_large", sequence_length=128, num_classes=30522,
                                     kwargs={"vocab_size": 30522, "masked_positions": 20}))


def test_inference_call_pays_the_inference_overhead_not_the_training_fit(
        resnet50_synthetic: ModelProfile) -> None:
    infer = simulate(resnet50_synthetic, ONE, INFER)
    train = simulate(resnet50_synthetic, ONE, ExecutionPlan(
        micro_batch_size=1, precision="16.16", partials="half", eight_bit_io=True))
    c = DEFAULT_CONSTANTS
    assert infer.phases["host_overhead"] == pytest.approx(c.infer_call_overhead_s)
    assert train.phases["host_overhead"] == pytest.approx(c.call_overhead_s)
    assert c.infer_call_overhead_s < c.call_overhead_s / 100
    assert infer.bottleneck != "host_overhead"


def test_batch_1_inference_latency_under_a_millisecond(resnet50_synthetic: ModelProfile) -> None:
    """Batch 1, device iterations 1: a call of well under a millisecond, i.e. more than a
    thousand images a second (not the 30-40 a training call overhead allowed)."""
    r = simulate(resnet50_synthetic, ONE, INFER)
    assert r.fits
    assert r.latency_s < 1e-3 and r.step_time_s < 1e-3
    assert r.throughput > 1000.0


def test_device_iterations_amortise_only_the_call(resnet50_synthetic: ModelProfile) -> None:
    one = simulate(resnet50_synthetic, ONE, INFER)
    hundred = simulate(resnet50_synthetic, ONE, replace(INFER, device_iterations=100))
    assert hundred.throughput > one.throughput
    # The step itself is the same; only the call's overhead is shared by 100 steps.
    saved = one.step_time_s - hundred.step_time_s
    assert saved == pytest.approx(DEFAULT_CONSTANTS.infer_call_overhead_s * 0.99, rel=0.05)
    # A call's outputs come back when it ends: its latency is the whole call's.
    assert one.latency_s == pytest.approx(one.step_time_s)
    assert hundred.latency_s == pytest.approx(100 * hundred.step_time_s)


def test_latency_counts_the_first_copy_and_the_call(resnet50: ModelProfile,
                                                    resnet50_synthetic: ModelProfile) -> None:
    """Inputs fed from the host: the latency holds the input's copy to the IPU, which nothing
    before the first micro-batch hides, and the call's cost; synthetic inputs have no copy."""
    plan = replace(INFER, io_tiles=64)  # one stage: the copies overlap compute
    fed, made = simulate(resnet50, ONE, plan), simulate(resnet50_synthetic, ONE, plan)
    copy_s = fed.extras["stream_copy_s"]
    assert copy_s > 0.0 and made.extras["stream_copy_s"] == 0.0
    assert fed.latency_s >= made.latency_s + copy_s * 0.99
    assert made.latency_s > DEFAULT_CONSTANTS.infer_call_overhead_s
    # Prefetching hides later copies, never a call's first: at one device iteration the
    # latency does not move with the depth (a latency search chose depth 3 to "save" it).
    deep = [simulate(resnet50, ONE, replace(INFER, prefetch_depth=d)) for d in (1, 2, 3, 4)]
    assert all(r.latency_s == pytest.approx(deep[0].latency_s) for r in deep)


def test_synthetic_data_costs_the_host_nothing(resnet50: ModelProfile,
                                               resnet50_synthetic: ModelProfile) -> None:
    # Graphcore's synthetic data is made on the IPU (PopTorch `enableSyntheticData`): no data
    # pipeline and no host-device stream, so 8-bit I/O changes nothing either.
    plan = replace(INFER, micro_batch_size=32, device_iterations=128)
    real = simulate(resnet50, C600, plan)
    assert real.phases["host_preprocess"] > 0.0
    for system in (C600, ONE):  # a card in its server; an IPU behind a gateway
        for eight_bit in (True, False):
            synthetic = simulate(resnet50_synthetic, system, replace(plan, eight_bit_io=eight_bit))
            assert synthetic.extras["host_s_per_sample"] == 0.0
            assert synthetic.extras["stream_copy_s"] == synthetic.extras["io_call_s"] == 0.0
            assert synthetic.phases["host_preprocess"] == synthetic.phases["host_io"] == 0.0
            assert synthetic.throughput > real.throughput
    assert simulate(resnet50_synthetic, C600, plan).throughput == simulate(
        resnet50_synthetic, C600, replace(plan, eight_bit_io=False)).throughput


@pytest.fixture(scope="module")
def resnet50_generated() -> ModelProfile:
    return profile_model(ModelConfig(name="resnet50", input_shape=[3, 224, 224],
                                     num_classes=1000, dataset=DatasetConfig(name=GENERATED)))


def test_generated_data_is_copied_to_the_ipu_but_not_prepared(
        resnet50_generated: ModelProfile, resnet50_synthetic: ModelProfile) -> None:
    # Random samples made in host memory in the stream's type (Graphcore's `--data generated`,
    # a runtime benchmark feeding its own inputs): no load, augmentation or cast on the host,
    # but each micro-batch crosses the host link, 8-bit I/O halving its bytes.
    plan = replace(INFER, micro_batch_size=32, device_iterations=128)
    eight = simulate(resnet50_generated, ONE, plan)
    wide = simulate(resnet50_generated, ONE, replace(plan, eight_bit_io=False))
    for r in (eight, wide):
        assert r.extras["host_s_per_sample"] == 0.0
        assert r.extras["stream_copy_s"] > 0.0 and r.extras["io_call_s"] > 0.0
    assert wide.extras["io_call_s"] == pytest.approx(2 * eight.extras["io_call_s"])
    assert simulate(resnet50_synthetic, ONE, plan).throughput >= eight.throughput >= wide.throughput


def test_inference_memory_below_training_memory_for_the_same_plan(
        resnet50_synthetic: ModelProfile) -> None:
    plan = replace(INFER, micro_batch_size=16, optimizer="momentum")
    infer = simulate(resnet50_synthetic, ONE, plan)
    train = simulate(resnet50_synthetic, ONE, replace(plan, mode="train"))
    i, t = infer.memory[0].categories, train.memory[0].categories
    for cat in ("gradients", "optimizer_state", "activation_stash", "recompute_checkpoints"):
        assert i[cat] == 0
    assert t["optimizer_state"] > 0
    assert i["activations"] < t["activations"]
    assert i["code"] < t["code"]
    assert infer.memory[0].total_bytes < train.memory[0].total_bytes


def test_batch_norm_folds_into_the_convolutions(resnet50: ModelProfile) -> None:
    graph = inference_graph(resnet50)
    ops = resnet50.ops
    norms = [i for i, op in enumerate(ops) if op.kind == "norm"]
    assert norms and all(graph.dropped[i] for i in norms)  # every BN follows a conv
    assert all(ops[i - 1].kind == "conv" for i in norms)
    kept = [op.kind for op, d in zip(ops, graph.dropped, strict=True) if not d]
    assert "loss" not in kept and kept.count("conv") == sum(op.kind == "conv" for op in ops)
    # Fewer compute sets, so less fixed exchange per pass than the training forward.
    plan = ExecutionPlan(mode="infer", micro_batch_size=1, precision="16.16")
    infer = simulate(resnet50, ONE, plan)
    train = simulate(resnet50, ONE, ExecutionPlan(micro_batch_size=1, precision="16.16"))
    assert infer.stages[0].forward_s < train.stages[0].forward_s


def test_layer_norm_does_not_fold_and_dropout_does_not_run(bert_large: ModelProfile) -> None:
    graph = inference_graph(bert_large)
    for op, dropped in zip(bert_large.ops, graph.dropped, strict=True):
        if op.kind == "norm":
            assert not dropped, op.name  # a layer norm has statistics of its own input
        if op.name.endswith("dropout"):
            assert dropped, op.name
    # Live ranges: never more than the traced forward keeps at its peak.
    assert all(live <= b.max_live_elements
               for live, b in zip(graph.live_block, bert_large.block_stats, strict=True))


@pytest.mark.parametrize(("model", "batch"), [("resnet50", 80), ("bert_large", 18)])
def test_configurations_graphcore_shipped_for_one_ipu_inference_fit(
        model: str, batch: int, resnet50_synthetic: ModelProfile,
        bert_large: ModelProfile) -> None:
    profile = resnet50_synthetic if model == "resnet50" else bert_large
    plan = replace(INFER, micro_batch_size=batch, device_iterations=100)
    r = simulate(profile, ONE, plan)
    assert r.fits, r.reason


def test_c600_clock_speeds_up_the_same_chip(resnet50_generated: ModelProfile) -> None:
    plan = replace(INFER, micro_batch_size=32, device_iterations=128, io_tiles=64)
    fast = simulate(resnet50_generated, C600, plan)
    slow = simulate(resnet50_generated, ONE, plan)
    # On the device, at most the clock ratio (the I/O tiles hide the copies).
    assert slow.device_throughput < fast.device_throughput
    assert fast.device_throughput <= slow.device_throughput * 1.5 / 1.33 * 1.01
    # The card's PCIe Gen4 x16 is the whole path: a copy at twice the gateway's x8 rate, and
    # no network leg to carry.
    latency = DEFAULT_CONSTANTS.stream_latency_s  # paid on either path
    assert fast.extras["stream_copy_s"] - latency < 0.6 * (slow.extras["stream_copy_s"] - latency)
    assert fast.extras["io_call_s"] == 0.0 < slow.extras["io_call_s"]


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize(("io_tiles", "depth"), [(0, 1), (0, 3), (64, 1), (64, 3)])
@pytest.mark.parametrize("di", [1, 4])
def test_no_call_loop_runs_faster_than_its_calls(resnet50: ModelProfile,
                                                 resnet50_generated: ModelProfile, mode: str,
                                                 io_tiles: int, depth: int, di: int) -> None:
    """A call takes its inputs when it starts and returns its results when it ends: calls run
    one after another, so the samples of a call over its latency bound the throughput (a call's
    first copy has no earlier slot to hide in, whatever the prefetch depth or I/O tiles)."""
    for mb in (1, 8):
        plan = replace(INFER, mode=mode, micro_batch_size=mb, io_tiles=io_tiles,
                       prefetch_depth=depth, device_iterations=di, eight_bit_io=False)
        for system, profile in ((s, p) for s in (ONE, C600)
                                for p in (resnet50, resnet50_generated)):
            r = simulate(profile, system, plan)
            assert r.fits
            per_call = r.samples_per_step * di
            assert r.throughput <= per_call / r.latency_s * (1 + 1e-9), (system, plan)
