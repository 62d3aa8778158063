"""Direction tests of the time model: one phenomenon of the seeds per test."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.hardware import HOST, HostSpec, System, make_system
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import DEFAULT_CONSTANTS, simulate
from tests.simulator.helpers import SEED_PLAN, ipu_bytes, matmul_profile, run

ONE = make_system("mk2", 1)
DEVICE = ("compute", "exchange", "inter_ipu", "pipeline_ramp", "weight_update",
          "all_reduce_pod", "all_reduce_gw", "streaming_memory", "host_io")


def device_step_s(r: object) -> float:
    return sum(r.phases[p] for p in DEVICE)  # type: ignore[attr-defined]


def test_phases_add_up_to_the_step(resnet101: ModelProfile, mk2x2: System) -> None:
    for changes in ({}, {"async_dataloader": True}, {"mode": "infer", "gradient_accumulation": 1}):
        r = run(resnet101, mk2x2, **changes)
        assert sum(r.phases.values()) == pytest.approx(r.step_time_s, rel=1e-9)
        assert r.throughput == pytest.approx(r.samples_per_step / r.step_time_s, rel=1e-9)


def test_fp16_speeds_up_convolutions(resnet101: ModelProfile, mk2x2: System) -> None:
    fp16, fp32 = run(resnet101, mk2x2), run(resnet101, mk2x2, precision="32.32")
    half = run(resnet101, mk2x2, partials="half")
    assert fp32.phases["compute"] > 1.5 * fp16.phases["compute"]
    assert fp32.phases["compute"] > 2.5 * half.phases["compute"]


def test_half_partials_speed_up_and_shrink_convolutions(resnet101: ModelProfile,
                                                       mk2x2: System) -> None:
    """Seed hands-on (AI-Float white paper): halving the partials' precision doubles the
    matmul/conv arithmetic rate; fp16 partials also halve the partials' temporary memory."""
    full, half = run(resnet101, mk2x2), run(resnet101, mk2x2, partials="half")
    assert half.phases["compute"] < 0.75 * full.phases["compute"]
    assert half.phases["exchange"] <= full.phases["exchange"]
    temp = [ipu_bytes(r, 0, "temporaries") for r in (full, half)]
    assert temp[1] < temp[0]
    # An fp32 model accumulates in fp32 whatever the setting.
    fp32 = [run(resnet101, mk2x2, precision="32.32", partials=p) for p in ("float", "half")]
    assert fp32[0].phases["compute"] == fp32[1].phases["compute"]


def test_large_matmuls_run_closer_to_peak_than_small() -> None:
    """Per-compute-set overhead and too little work per tile make small ops slow."""
    plan = ExecutionPlan(mode="infer", micro_batch_size=1, precision="16.16", partials="half")

    def flops_per_s(m: int, k: int, n: int) -> float:
        r = simulate(matmul_profile(m, k, n), ONE, plan)
        return 2.0 * m * k * n / (r.stages[0].forward_s)

    peak = 1472 * 128 * 1.33e9 * DEFAULT_CONSTANTS.matmul_efficiency  # the Mk2 FP16.16 peak
    small, large = flops_per_s(64, 64, 64), flops_per_s(8192, 4096, 4096)
    assert small < 0.05 * peak < 0.9 * peak < large <= peak


def test_attention_operands_are_each_samples_own() -> None:
    """A Linear's weight is one K x N matrix that every sample shares: exchanged once per pass,
    its gradient reduced over the micro-batch into K x N outputs. Attention's keys and values
    are each sample's own (per head): their bytes grow with the micro-batch, and so do the
    outputs of their gradient, which then fill the AMP like any other large pass."""
    heads, seq, dim = 16, 128, 64
    plan = ExecutionPlan(micro_batch_size=1, precision="16.16", partials="half",
                         gradient_accumulation=1, optimizer="sgd")

    def costs(rhs: float, batch: int) -> tuple[float, float]:
        r = simulate(matmul_profile(heads * seq, dim, seq, rhs=rhs), ONE,
                     replace(plan, micro_batch_size=batch))
        return r.stages[0].backward_s / batch, r.phases["exchange"]

    shared = {b: costs(0.0, b) for b in (1, 16)}
    own = {b: costs(float(heads), b) for b in (1, 16)}
    # The gradient of 16 x 16 keys spreads over the tiles; a shared weight's has 8,192 outputs.
    assert own[16][0] < 0.5 * shared[16][0]
    # Exchanged: (16 b - 1) K N more elements than a weight in forward and again in backward,
    # less the weight gradient's K N partials that only a weight reduces: 2 (16 b - 1) - 1.
    diff = {b: own[b][1] - shared[b][1] for b in (1, 16)}
    assert diff[16] / diff[1] == pytest.approx((2 * 255 - 1) / (2 * 15 - 1), rel=1e-6)


def test_memory_bound_ops_scale_with_bytes() -> None:
    plan = ExecutionPlan(mode="infer", micro_batch_size=1, precision="16.16")
    with_norm = [simulate(matmul_profile(m, 64, 64, norm=True), ONE, plan).stages[0].forward_s
                 - simulate(matmul_profile(m, 64, 64), ONE, plan).stages[0].forward_s
                 for m in (1 << 18, 1 << 20)]
    overhead = DEFAULT_CONSTANTS.compute_set_overhead_cycles / 1.33e9
    # Beyond the fixed compute-set cost, a norm streams its bytes: 4x the elements, 4x the time.
    assert (with_norm[1] - overhead) == pytest.approx(4 * (with_norm[0] - overhead), rel=1e-6)


def test_gradient_accumulation_amortises_ramp_and_update(resnet101: ModelProfile,
                                                         mk2x2: System) -> None:
    per_sample = []
    for ga in (3, 8, 32):
        r = run(resnet101, mk2x2, gradient_accumulation=ga, async_dataloader=True,
                eight_bit_io=True, dataloader_workers=64)
        assert r.phases["pipeline_ramp"] > 0
        assert r.phases["pipeline_ramp"] == pytest.approx(
            run(resnet101, mk2x2, gradient_accumulation=3).phases["pipeline_ramp"])
        per_sample.append(device_step_s(r) / r.samples_per_step)
    assert per_sample[0] > per_sample[1] > per_sample[2]


def test_device_iterations_amortise_the_call(resnet101: ModelProfile, mk2x2: System) -> None:
    rates = []
    for di in (1, 4, 16):
        r = run(resnet101, mk2x2, device_iterations=di)
        assert r.phases["host_overhead"] == pytest.approx(DEFAULT_CONSTANTS.call_overhead_s / di)
        assert r.phases["compute"] == run(resnet101, mk2x2).phases["compute"]
        rates.append(r.device_throughput)
    assert rates[0] < rates[1] < rates[2]


def test_eight_bit_io_cuts_transfer_and_host_work(resnet101: ModelProfile, mk2x2: System) -> None:
    plain, eight = run(resnet101, mk2x2), run(resnet101, mk2x2, eight_bit_io=True)
    assert eight.phases["host_io"] < plain.phases["host_io"]
    assert eight.phases["host_preprocess"] < 0.5 * plain.phases["host_preprocess"]
    assert eight.throughput > 2 * plain.throughput
    fp32_in = run(resnet101, mk2x2, precision="32.32")
    assert fp32_in.phases["host_io"] > plain.phases["host_io"]


def test_prefetch_depth_hides_host_latency_up_to_three(resnet101: ModelProfile,
                                                       mk2x2: System) -> None:
    io = [run(resnet101, mk2x2, prefetch_depth=d).phases["host_io"] for d in (1, 2, 3, 4)]
    assert io[0] > io[1] > io[2] == io[3]


def test_io_tiles_overlap_transfers_for_one_stage_only(resnet101: ModelProfile,
                                                       mk2x2: System) -> None:
    """PopTorch refuses overlapped I/O with PipelinedExecution (Compiler.cpp): the tiles of a
    pipelined plan hold the streams and take tiles from compute, hiding nothing."""
    one_ipu = make_system("mk2", 1)
    alone = run(resnet101, one_ipu, splits=())
    tiles = run(resnet101, one_ipu, splits=(), io_tiles=64)
    assert tiles.extras["io_overlap"] and tiles.phases["host_io"] < alone.phases["host_io"]
    # Fewer compute tiles: the compute itself gets slower.
    assert tiles.phases["compute"] > alone.phases["compute"]
    for schedule in ("grouped", "interleaved"):
        piped = run(resnet101, mk2x2, io_tiles=64, schedule=schedule)
        assert not piped.extras["io_overlap"]
        assert piped.phases["host_io"] == pytest.approx(
            run(resnet101, mk2x2, schedule=schedule).phases["host_io"])


def test_a_faster_device_never_exposes_more_of_an_overlapped_copy(resnet50: ModelProfile) -> None:
    """With I/O tiles, a micro-batch's copy runs during the previous one's compute: the period
    is the longer of the two. A network-bound copy prefetched ahead is hidden by that one slot,
    not twice, so a shorter slot (the Bow's clock) cannot lengthen the step."""
    slow_network = replace(HOST, network_bytes_per_s=2e8)
    plan = replace(SEED_PLAN, mode="infer", gradient_accumulation=1, splits=(), io_tiles=64,
                   prefetch_depth=3, micro_batch_size=32, device_iterations=16,
                   async_dataloader=True)
    from ipu_tune.simulator._host import first_copy_s, input_bytes_per_sample

    steps = {}
    for ipu in ("mk2", "bow"):
        system = make_system(ipu, 1, host=slow_network)
        r = simulate(resnet50, system, plan)
        assert r.extras["io_overlap"]
        slot, copy = r.stages[0].forward_s, r.extras["stream_copy_s"]
        assert copy > slot  # network-bound: the copy sets the period
        steps[ipu] = r.phases["compute"] + r.phases["exchange"] + r.phases["host_io"]
        # A call's first copy has no slot before it: paid whole once per call.
        first = first_copy_s(input_bytes_per_sample(resnet50, plan) * 32, system, plan,
                             DEFAULT_CONSTANTS)
        once = (first - (copy - slot)) / plan.device_iterations
        assert steps[ipu] == pytest.approx(max(slot, copy) + once, rel=1e-6)  # per device step
    assert steps["bow"] <= steps["mk2"]


def test_a_pipeline_copy_moves_at_the_links_joining_two_ipus(resnet101: ModelProfile,
                                                             mk2x2: System) -> None:
    """The same IPU pair carries a ring hop and a stage's copy: 2 links x 16 GB/s per direction
    x 0.85 (poplibs' cost model), not all ten links of the IPU."""
    from ipu_tune.simulator._collectives import link_hop_bytes_per_s

    bw = link_hop_bytes_per_s(mk2x2.ipu, DEFAULT_CONSTANTS)
    assert bw == pytest.approx(2 * 16e9 * 0.85)
    r = run(resnet101, mk2x2)
    # Stage 0 sends layer3.8's output: 1024 channels x 4 x 4 (64x64 input / 16), fp16, x 64.
    sent_bytes = 1024 * 4 * 4 * 2 * 64
    forward_link_s = r.stages[0].inter_ipu_s - r.stages[0].inter_ipu_back_s
    assert forward_link_s == pytest.approx(sent_bytes / bw + DEFAULT_CONSTANTS.sync_latency_s)


def test_a_ring_hop_moves_at_its_ipus_links() -> None:
    """Mk1's IPU-Links carry twice a Mk2's a direction (64 GB/s a link against 32, both ways;
    ipu-hardware.md), so the same gradients all-reduce over two Mk1 IPUs' ring at twice the
    bandwidth."""
    from ipu_tune.config import ModelConfig
    from ipu_tune.models import profile_model

    prof = profile_model(ModelConfig(name="resnet50"))
    plan = ExecutionPlan(micro_batch_size=4, precision="16.16", replication_factor=2)
    terms = {ipu: simulate(prof, make_system(ipu, 2), plan).extras["all_reduce_terms"]
             for ipu in ("mk1", "mk2")}
    assert terms["mk2"]["pod_bandwidth_s"] == pytest.approx(
        2 * terms["mk1"]["pod_bandwidth_s"])


def test_sync_loader_adds_async_overlaps(resnet101: ModelProfile, mk2x2: System) -> None:
    sync = run(resnet101, mk2x2, eight_bit_io=True)
    asyn = run(resnet101, mk2x2, eight_bit_io=True, async_dataloader=True)
    host = sync.extras["host_call_s"]
    device = sync.extras["device_call_s"]
    calls = sync.samples_per_step * 4
    assert sync.throughput == pytest.approx(calls / (host + device))
    assert asyn.throughput == pytest.approx(calls / max(host, device))
    assert asyn.bottleneck == "host_preprocess"


def test_loader_workers_scale_until_the_host_cores(resnet101: ModelProfile,
                                                   mk2x2: System) -> None:
    host = HostSpec(cpu_cores=9)  # 8 for the workers, 1 for the instance's own process
    system = System(ipu=mk2x2.ipu, num_ipus=2, hosts=1, host=host)
    rates = [run(resnet101, system, async_dataloader=True, dataloader_workers=w).throughput
             for w in (1, 2, 8, 32)]
    assert rates[0] < rates[1] < rates[2]
    assert rates[3] == rates[2]


def test_host_preprocessing_from_profile_or_host(resnet101: ModelProfile, mk2x2: System) -> None:
    slow_host = System(ipu=mk2x2.ipu, num_ipus=2, host=HostSpec(preprocess_s_per_sample=1e-3))
    base = run(resnet101, mk2x2, eight_bit_io=True)
    slow = run(resnet101, slow_host, eight_bit_io=True)
    assert base.extras["host_s_per_sample"] == pytest.approx(
        DEFAULT_CONSTANTS.preprocess_s_per_sample)
    assert slow.extras["host_s_per_sample"] == pytest.approx(1e-3)
    assert slow.throughput < base.throughput


def test_hosts_share_bandwidth_and_preprocessing(resnet50: ModelProfile) -> None:
    plan = ExecutionPlan(micro_batch_size=16, precision="16.16", gradient_accumulation=8,
                         replication_factor=16, recompute="checkpoints", eight_bit_io=True)
    one_host = simulate(resnet50, make_system("mk2", 16, hosts=1), plan)
    four_hosts = simulate(resnet50, make_system("mk2", 16, hosts=4), plan)
    assert one_host.extras["stream_copy_s"] > four_hosts.extras["stream_copy_s"]
    assert one_host.extras["host_call_s"] == pytest.approx(4 * four_hosts.extras["host_call_s"])


def test_longest_stage_bounds_the_pipeline(resnet101: ModelProfile, mk2x2: System) -> None:
    balanced = run(resnet101, mk2x2, splits=("layer3.8",))
    lopsided = run(resnet101, mk2x2, splits=("layer1.1",))
    for r in (balanced, lopsided):
        slot = max(r.extras["stage_slot_s"])
        busy = r.phases["compute"] + r.phases["exchange"] + r.phases["inter_ipu"]
        assert busy == pytest.approx(8 * slot)
    assert device_step_s(lopsided) > device_step_s(balanced)


def test_schedules_grouped_interleaved_sharded(resnet101: ModelProfile, mk2x2: System) -> None:
    grouped = run(resnet101, mk2x2)
    inter = run(resnet101, mk2x2, schedule="interleaved")
    sharded = run(resnet101, mk2x2, schedule="sharded")
    assert device_step_s(grouped) < device_step_s(inter)
    # Sharded: one stage at a time, every micro-batch through all stages, no ramp.
    assert sharded.phases["pipeline_ramp"] == 0
    assert sharded.phases["compute"] + sharded.phases["exchange"] + sharded.phases[
        "inter_ipu"] == pytest.approx(8 * sum(sharded.extras["stage_slot_s"]))
    assert device_step_s(sharded) > device_step_s(grouped)


def test_ramp_only_for_pipelines(resnet50: ModelProfile) -> None:
    plan = ExecutionPlan(micro_batch_size=16, precision="16.16", gradient_accumulation=8,
                         recompute="checkpoints")
    single = simulate(resnet50, ONE, plan)
    four = ExecutionPlan(micro_batch_size=16, precision="16.16", gradient_accumulation=8,
                         splits=("layer2.0", "layer3.0", "layer4.0"), recompute="checkpoints")
    piped = simulate(resnet50, make_system("mk2", 4), four)
    assert single.phases["pipeline_ramp"] == 0
    assert piped.phases["pipeline_ramp"] > 0
    # The ramp is at most N-1 slots of the longest forward plus the longest backward (seed
    # guide 4.2: 2N half-used stages; the two maxima may be on different stages).
    f = max(t.forward_s + t.inter_ipu_s for t in piped.stages)
    b = max(t.backward_s + t.recompute_s + t.inter_ipu_s for t in piped.stages)
    assert piped.phases["pipeline_ramp"] <= 3 * (f + b) * (1 + 1e-9)


def test_recompute_adds_the_forward(resnet101: ModelProfile, mk2x2: System) -> None:
    none, ckpt = run(resnet101, mk2x2, recompute="none"), run(resnet101, mk2x2)
    for a, b in zip(none.stages, ckpt.stages, strict=True):
        assert a.recompute_s == 0
        assert b.recompute_s == pytest.approx(b.forward_s)
    assert device_step_s(ckpt) > device_step_s(none)


def test_inter_ipu_transfers_only_between_stages(resnet101: ModelProfile, mk2x2: System) -> None:
    r = run(resnet101, mk2x2)
    assert r.phases["inter_ipu"] > 0
    assert r.stages[0].inter_ipu_s > 0 and r.stages[1].inter_ipu_s > 0
    single = run(resnet101, ONE, splits=(), micro_batch_size=16)
    assert single.phases["inter_ipu"] == 0


def test_weight_update_all_reduce_and_streaming(resnet50: ModelProfile) -> None:
    plan = ExecutionPlan(micro_batch_size=16, precision="16.16", gradient_accumulation=8,
                         recompute="checkpoints")
    single = simulate(resnet50, ONE, plan)
    assert single.phases["weight_update"] > 0
    assert single.phases["all_reduce_pod"] == 0 and single.phases["streaming_memory"] == 0
    offload = simulate(resnet50, ONE, ExecutionPlan(**{**plan.__dict__,
                                                       "offload_optimizer_state": True}))
    assert offload.phases["streaming_memory"] > 0
    ar = {}
    for r in (2, 4, 16):
        res = simulate(resnet50, make_system("mk2", r),
                       ExecutionPlan(**{**plan.__dict__, "replication_factor": r}))
        ar[r] = res.phases["all_reduce_pod"]
        assert res.phases["all_reduce_gw"] == 0  # one POD: no GW-Links
    # Ring tiers: 2(k-1)/k x the bytes entering each tier, plus a sync per ring step.
    assert 0 < ar[2] < ar[4] < ar[16] < 3.0 * ar[2]
    infer = simulate(resnet50, ONE, ExecutionPlan(mode="infer", micro_batch_size=16,
                                                  precision="16.16"))
    assert infer.phases["weight_update"] == infer.phases["all_reduce_pod"] == 0
    assert all(s.backward_s == 0 for s in infer.stages)


def test_replicated_tensor_sharding_trades_update_for_gathers(resnet50: ModelProfile) -> None:
    base = dict(micro_batch_size=16, precision="16.16", gradient_accumulation=8,
                recompute="checkpoints", replication_factor=8, optimizer="adamw")
    pod = make_system("mk2", 8)
    plain = simulate(resnet50, pod, ExecutionPlan(**base))
    rts = simulate(resnet50, pod, ExecutionPlan(**base, replicated_tensor_sharding=True))
    assert rts.phases["weight_update"] < plain.phases["weight_update"]
    assert rts.extras["rts_gather_s"] > 0 == plain.extras["rts_gather_s"]
    assert rts.phases["all_reduce_pod"] > plain.phases["all_reduce_pod"]


def test_lower_available_memory_costs_cycles(resnet50: ModelProfile) -> None:
    plan = ExecutionPlan(micro_batch_size=32, precision="16.16", gradient_accumulation=8,
                         recompute="checkpoints")
    times = []
    for amp in (0.6, 0.2, 0.05):
        r = simulate(resnet50, ONE, ExecutionPlan(**{**plan.__dict__,
                                                     "available_memory_proportion": amp}))
        times.append(r.phases["compute"] + r.phases["exchange"])
    assert times[0] <= times[1] < times[2]


def test_inference_is_forward_only_and_faster(resnet101: ModelProfile, mk2x2: System) -> None:
    train = run(resnet101, mk2x2, gradient_accumulation=1, async_dataloader=True,
                eight_bit_io=True, dataloader_workers=64)
    infer = run(resnet101, mk2x2, mode="infer", gradient_accumulation=1, async_dataloader=True,
                eight_bit_io=True, dataloader_workers=64)
    assert infer.device_throughput > 2 * train.device_throughput


def test_bottleneck_names_the_bounding_phase(resnet50: ModelProfile,
                                             resnet101: ModelProfile, mk2x2: System) -> None:
    assert run(resnet101, mk2x2).bottleneck == "host_preprocess"
    fed = run(resnet101, mk2x2, eight_bit_io=True, async_dataloader=True, dataloader_workers=32,
              gradient_accumulation=64, device_iterations=16)
    assert fed.bottleneck in ("compute", "exchange")
    offload = ExecutionPlan(micro_batch_size=4, precision="32.32", gradient_accumulation=1,
                            offload_optimizer_state=True, device_iterations=64,
                            eight_bit_io=True, async_dataloader=True, dataloader_workers=32)
    assert simulate(resnet50, ONE, offload).bottleneck == "streaming_memory"
    ramp = run(resnet101, mk2x2, gradient_accumulation=1, eight_bit_io=True,
               async_dataloader=True, dataloader_workers=32, device_iterations=64,
               schedule="interleaved")
    assert ramp.bottleneck == "pipeline_ramp"


def test_a_token_sample_streams_every_input_tensor_it_stores() -> None:
    """`model.dataset.sample_bytes` of a token model is what one sample puts on the
    host-to-IPU stream (ids, segment ids, masks as int32), not the ids alone."""
    import ipu_tune

    def bert(sample_bytes: int) -> ipu_tune.SimResult:
        return ipu_tune.evaluate({
            "model": {"name": "bert_base", "sequence_length": 128,
                      "dataset": {"name": "wikipedia", "sample_bytes": sample_bytes}},
            "workload": {"mode": "train", "micro_batch_size": 8},
            "system": {"ipu": "mk2", "num_ipus": 4},
            "plan": {"precision": "16.16", "gradient_accumulation": 16,
                     "pipeline": {"splits": ["encoder.layer.4", "encoder.layer.8",
                                             "encoder.layer.11"]}}})

    ids, three = bert(4 * 128), bert(3 * 4 * 128)
    streams = [ipu_bytes(r, 0, "stream_buffers") for r in (ids, three)]
    assert streams[1] == 3 * streams[0] == 3 * 8 * 4 * 128  # prefetch depth 1
    assert three.phases["host_io"] > ids.phases["host_io"]


def test_each_serial_pass_fills_and_drains_the_amp_again() -> None:
    """Below its need, the AMP splits a matmul into P serial passes, each a share of the
    outputs on every tile with the same fill and drain latency per output: P passes pay that
    latency P times, the arithmetic once (`_compute._passes_sums`)."""
    m, k, n = 1 << 14, 1024, 1024
    plan = ExecutionPlan(mode="infer", micro_batch_size=1, precision="16.16", partials="half")
    by_passes = {}
    for amp in (0.6, 0.05, 0.01, 0.002):
        r = simulate(matmul_profile(m, k, n), ONE, replace(plan, available_memory_proportion=amp))
        by_passes[r.extras["amp_max_passes"]] = r.phases["compute"]
    assert len(by_passes) == 4 and 1 in by_passes
    c = DEFAULT_CONSTANTS
    fill = c.matmul_half_outputs_per_tile / (m * n / 1472)  # o_half / o, as the arithmetic's 1
    for passes, compute_s in by_passes.items():
        assert compute_s / by_passes[1] == pytest.approx(
            (1 + passes * fill) / (1 + fill), rel=1e-9), passes
