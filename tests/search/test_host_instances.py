"""`search=throughput` on a host-bound POD16 raises `plan.host_instances`."""

from __future__ import annotations

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.search._codec import fit_instances
from tests.search._helpers import compose_cfg, make_problem, run_study

# ResNet-50 on ImageNet-sized inputs with a costly host pipeline (decode + augment, 4 ms per
# image on one core): one PopRun instance with at most 32 loader workers feeds ~8,000
# images/s, a quarter of what 16 IPUs consume; the server's 128 cores could feed them all.
HOST_BOUND = ("model=resnet50", "system=pod16", "search=throughput",
              "workload.micro_batch_size=16", "model.dataset.preprocess_s_per_sample=0.004",
              "plan.replication_factor=16", "plan.precision=16.16")


def test_instances_are_fitted_to_replicas_and_servers() -> None:
    assert fit_instances(16, replicas=4, hosts=1) == 4
    assert fit_instances(8, replicas=16, hosts=4) == 8
    assert fit_instances(2, replicas=16, hosts=4) == 2  # below the servers: one per server
    assert fit_instances(8, replicas=16, hosts=3) == 2  # 8 does not split over 3 servers


def test_throughput_search_raises_instances_on_a_host_bound_pod16() -> None:
    cfg = compose_cfg(*HOST_BOUND)
    pinned = frozenset({"plan.replication_factor", "plan.precision"})
    problem = make_problem(cfg, pinned=pinned)
    assert "plan.host_instances" in problem.codec.knobs
    user = problem.simulate(problem.warm_plans()[0].config)
    study = run_study(problem, 60)
    best = problem.best_trial(study)
    assert best is not None
    found = problem.config_from_params(best.params)
    result = problem.simulate(found)
    assert result.fits and found.plan.replication_factor == 16
    assert found.plan.host_instances > 1
    assert 16 % found.plan.host_instances == 0
    assert result.throughput > 2 * max(user.throughput, 1.0)
    # One instance of the same plan is bound by its host pipeline.
    one = problem.config_from_params({**best.params, "plan.host_instances": 1})
    single = problem.simulate(one)
    assert single.throughput < result.throughput
    assert single.bottleneck == "host_preprocess" or single.extras["host_call_s"] > (
        single.extras["device_call_s"])


def test_warm_start_on_a_pod64_with_more_ipus_than_blocks() -> None:
    """The user's single-replica plan would need 64 stages of an 18-block model: the warm
    plans skip splitting it rather than failing, and the others replicate."""
    problem = make_problem(compose_cfg("model=resnet50", "system=pod64",
                                       "workload.micro_batch_size=16"))
    plans = problem.warm_plans()
    assert plans and all(wp.config.plan.replication_factor > 1 for wp in plans)


def test_instances_pinned_alone_keep_the_replicas_they_divide() -> None:
    """`plan.host_instances=4` with the replicas searched: PopRun splits the replicas evenly
    among the instances, so only replication factors it divides are drawn (the search used to
    start from 1 replica and refuse the pin)."""
    cfg = compose_cfg("model=resnet50", "system=pod4", "search=throughput",
                      "plan.host_instances=4")
    problem = make_problem(cfg, pinned=frozenset({"plan.host_instances"}))
    assert problem.codec.r_options == (4,)
    with pytest.raises(IpuTuneError, match=r"plan\.host_instances=8: divides no replication"):
        make_problem(compose_cfg("model=resnet50", "system=pod4", "plan.host_instances=8"),
                     pinned=frozenset({"plan.host_instances"}))
