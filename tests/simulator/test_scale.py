"""Direction tests at POD scale: PopTorch's recomputation default, IPU-Fabric
collectives, host servers versus PopRun instances, and host transfers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ipu_tune.config import CONF_DIR, SystemConfig
from ipu_tune.hardware import HostSpec, System, make_system, system_from_config
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import DEFAULT_CONSTANTS, recompute_mode, replica_layout, simulate
from tests.simulator.helpers import SEED_PLAN, run

# ResNet-50 as MLPerf trains it, one IPU per replica (calibration/points.yaml encoding).
MLPERF = ExecutionPlan(
    micro_batch_size=20, optimizer="momentum", precision="16.16", gradient_accumulation=2,
    device_iterations=50, eight_bit_io=True, available_memory_proportion=0.15,
    recompute="checkpoints", async_dataloader=True, dataloader_workers=16, prefetch_depth=3,
    partials="half",
)


def pod(n: int, ipu: str = "mk2") -> System:
    """n IPUs as the presets describe them: one server per 16 IPUs."""
    return make_system(ipu, n, hosts=max(1, n // 16))


def mlperf(profile: ModelProfile, n: int, **changes: object) -> ExecutionPlan:
    fields: dict[str, object] = {"replication_factor": n, "host_instances": max(1, n // 2)}
    return replace(MLPERF, **{**fields, **changes})


# ---- recompute: auto = PopTorch's default -------------------------------------------------

def test_auto_recompute_is_pipeline_recomputation_when_pipelined(
        resnet101: ModelProfile, mk2x2: System) -> None:
    auto = replace(SEED_PLAN, recompute="auto")
    assert ExecutionPlan().recompute == "auto"
    assert recompute_mode(auto) == "checkpoints"
    assert run(resnet101, mk2x2, auto) == run(resnet101, mk2x2, recompute="checkpoints")
    single = replace(auto, splits=(), micro_batch_size=8)
    assert recompute_mode(single) == "none"
    one = make_system("mk2", 1)
    assert simulate(resnet101, one, single) == simulate(
        resnet101, one, replace(single, recompute="none"))
    assert recompute_mode(replace(auto, mode="infer", gradient_accumulation=1)) == "none"
    # ShardedExecution: PopTorch sets pipeline recomputation only when pipelined.
    sharded = replace(auto, schedule="sharded")
    assert recompute_mode(sharded) == "none"
    assert run(resnet101, mk2x2, sharded) == run(resnet101, mk2x2, schedule="sharded",
                                                 recompute="none")


def test_seed_ladder_as_the_seed_states_it(resnet101: ModelProfile, mk2x2: System) -> None:
    """No recompute key: fp32 GA 3 is out of memory, fp16 GA 3 fits (seed hands-on)."""
    plan = ExecutionPlan(micro_batch_size=64, optimizer="adamw", gradient_accumulation=3,
                         splits=("layer3.8",))
    assert not simulate(resnet101, mk2x2, replace(plan, precision="32.32")).fits
    assert simulate(resnet101, mk2x2, replace(plan, precision="16.16")).fits
    # Without PopTorch's recomputation the fp16 plan would stash every activation: no fit.
    assert not simulate(resnet101, mk2x2, replace(plan, precision="16.16",
                                                  recompute="none")).fits


# ---- topology and collectives ---------------------------------------------------------------

def test_replicas_fill_machines_then_pods() -> None:
    one_stage = ExecutionPlan(replication_factor=256)
    layout = replica_layout(pod(256), one_stage)
    assert (layout.in_machine, layout.machines, layout.pods) == (4, 16, 4)
    # A 4-stage replica fills a machine: rings start across machines.
    four = ExecutionPlan(replication_factor=16, splits=("a", "b", "c"))
    layout = replica_layout(pod(64), four)
    assert (layout.in_machine, layout.machines, layout.pods) == (1, 16, 1)
    assert replica_layout(pod(16), ExecutionPlan(replication_factor=16)).pods == 1


def test_all_reduce_grows_with_replicas_beyond_one_pod(resnet50: ModelProfile) -> None:
    times = {}
    for n in (16, 64, 128, 256):
        r = simulate(resnet50, pod(n), mlperf(resnet50, n))
        times[n] = (r.phases["all_reduce_pod"], r.phases["all_reduce_gw"])
    assert times[16][1] == times[64][1] == 0.0  # inside one IPU-Link domain
    assert times[16][0] < times[64][0]  # more machines in the ring: more hops and steps
    assert times[128][0] == pytest.approx(times[64][0])  # each POD reduces its own 64
    assert 0.0 < times[128][1] < times[256][1]  # then across PODs over GW-Links
    total = [sum(times[n]) for n in (16, 64, 128, 256)]
    assert total == sorted(total) and total[0] < total[-1]


def test_all_reduce_terms_are_paid_per_merged_buffer_over_the_ring_links(
        resnet50: ModelProfile) -> None:
    """Gradients merged into 50 MB buffers: the GW-Link step latency is paid per buffer (1 for
    ResNet-50's ~51 MB of fp16 gradients), not per gradient tensor; a ring hop inside a POD runs
    at 2 links x 16 GB/s x 0.85, not at all 10 links of the IPU."""
    c = DEFAULT_CONSTANTS
    grads = resnet50.parameters * 2.0
    buffers = -(-grads // c.all_reduce_buffer_bytes)
    assert buffers == 1
    r = simulate(resnet50, pod(128), mlperf(resnet50, 128))
    terms = r.extras["all_reduce_terms"]
    machine = pod(128).machine
    assert terms["gw_latency_s"] == pytest.approx(buffers * 2 * (2 - 1)
                                                  * machine.gw_link_step_latency_s)
    ring_bw = 2 * 16e9 * 0.85  # 2 links per hop at poplibs' 128 Gbit/s, 0.85 efficient
    in_machine, machines = 4, 16
    expected = (2 * 3 / 4 * grads + 2 * 15 / 16 * grads / in_machine) / ring_bw
    assert terms["pod_bandwidth_s"] == pytest.approx(expected)
    assert r.phases["all_reduce_pod"] == pytest.approx(terms["pod_bandwidth_s"]
                                                       + terms["pod_sync_s"])
    assert r.phases["all_reduce_gw"] == pytest.approx(terms["gw_bandwidth_s"]
                                                      + terms["gw_latency_s"])
    assert machines * in_machine == 64


def test_per_ipu_throughput_falls_with_pods_and_recovers_with_ga(
        resnet50: ModelProfile) -> None:
    def per_ipu(n: int, ga: int) -> float:
        r = simulate(resnet50, pod(n), mlperf(resnet50, n, gradient_accumulation=ga))
        assert r.fits, r.reason
        return r.throughput / n

    small = [per_ipu(n, 2) for n in (16, 64, 128, 256)]
    assert small == sorted(small, reverse=True)
    assert small[-1] < small[0]  # the collectives' share grows with the IPUs at GA 2
    large = [per_ipu(n, 32) for n in (16, 256)]
    assert large[1] > 0.99 * large[0]  # amortised over more micro-batches
    assert large[1] / large[0] > small[-1] / small[0]


def test_bow_is_faster_per_ipu_by_its_clock(resnet50: ModelProfile) -> None:
    mk2 = simulate(resnet50, pod(16), mlperf(resnet50, 16, gradient_accumulation=10))
    bow = simulate(resnet50, pod(16, "bow"), mlperf(resnet50, 16, gradient_accumulation=10))
    assert 1.2 < bow.throughput / mk2.throughput < 1.85 / 1.33 + 0.01


# ---- hosts (servers) and PopRun instances -----------------------------------------------------

def test_more_instances_raise_a_preprocessing_bound_rate_until_the_cores_bind(
        resnet50: ModelProfile) -> None:
    host = HostSpec(cpu_cores=32, preprocess_s_per_sample=5e-3)
    system = System(ipu=pod(16).ipu, num_ipus=16, hosts=1, host=host,
                    machine=pod(16).machine)
    rates = {}
    for k in (1, 2, 4, 8, 16):
        r = simulate(resnet50, system, mlperf(resnet50, 16, dataloader_workers=4,
                                              host_instances=k))
        assert r.extras["host_instances"] == k
        rates[k] = r.throughput
    assert rates[1] < rates[2] < rates[4]  # 4, 8, 16 workers: preprocessing bound
    # 8 instances x 4 workers want 32 cores but 8 hold their instance's own process.
    assert rates[8] > rates[4] and rates[16] <= rates[8]
    assert rates[8] == pytest.approx(16 * 20 * 2 * 50 / (16 * 20 * 2 * 50 * 5e-3 / 24), rel=0.02)


def test_instances_stop_helping_when_the_network_binds(resnet50: ModelProfile) -> None:
    slow_nic = HostSpec(network_bytes_per_s=2e9, preprocess_s_per_sample=1e-4)
    system = System(ipu=pod(16).ipu, num_ipus=16, hosts=1, host=slow_nic,
                    machine=pod(16).machine)
    rates = [simulate(resnet50, system, mlperf(resnet50, 16, host_instances=k)).throughput
             for k in (1, 4, 16)]
    assert rates[1] == pytest.approx(rates[2])
    nic_bound = 2e9 / (224 * 224 * 3)  # 8-bit images over the server's network
    assert 0.9 * nic_bound < rates[1] <= nic_bound


def test_more_servers_raise_an_io_bound_rate(resnet50: ModelProfile) -> None:
    slow_nic = HostSpec(network_bytes_per_s=1e9, preprocess_s_per_sample=1e-4)
    rates = []
    for hosts in (1, 2, 4):
        system = System(ipu=pod(16).ipu, num_ipus=16, hosts=hosts, host=slow_nic,
                        machine=pod(16).machine)
        rates.append(simulate(resnet50, system, mlperf(resnet50, 16)).throughput)
    assert rates[0] < rates[1] < rates[2]
    assert rates[1] == pytest.approx(2 * rates[0], rel=0.05)


def test_large_transfer_not_slowed_by_the_small_transfer_latency(
        resnet50: ModelProfile) -> None:
    """A transfer costs a latency plus bytes over bandwidth: per byte, a large transfer runs
    at the path's bandwidth, a small one is dominated by the latency."""
    from ipu_tune.simulator._host import stream_copy_s  # the unit under test

    system = make_system("mk2", 1)
    plan = ExecutionPlan()
    bw = system.ipu.host_link_bytes_per_s
    large, small = 640e6, 64.0
    t_large = stream_copy_s(large, system, plan, DEFAULT_CONSTANTS, 0.0)
    t_small = stream_copy_s(small, system, plan, DEFAULT_CONSTANTS, 0.0)
    assert t_large == pytest.approx(large / bw + DEFAULT_CONSTANTS.stream_latency_s)
    assert t_large / large < 1.01 / bw
    assert t_small / small > 10 / bw


# ---- presets ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,ipu,ipus,servers,pods", [
    ("pod16", "mk2", 16, 1, 1), ("pod64", "mk2", 64, 4, 1), ("pod128", "mk2", 128, 8, 2),
    ("pod256", "mk2", 256, 16, 4), ("bow_pod16", "bow", 16, 1, 1),
    ("bow_pod64", "bow", 64, 4, 1), ("bow_pod128", "bow", 128, 8, 2),
    ("bow_pod256", "bow", 256, 16, 4),
])
def test_system_presets_describe_the_mlperf_machines(
        name: str, ipu: str, ipus: int, servers: int, pods: int) -> None:
    data = yaml.safe_load((Path(CONF_DIR) / "system" / f"{name}.yaml").read_text())
    from ipu_tune.config import HostConfig

    cfg = SystemConfig(ipu=data["ipu"], num_ipus=data["num_ipus"], hosts=data["hosts"],
                       host=HostConfig(**data.get("host", {})))
    s = system_from_config(cfg)
    assert (s.ipu.name, s.num_ipus, s.hosts, s.pods) == (ipu, ipus, servers, pods)
    assert s.machines == ipus // 4
