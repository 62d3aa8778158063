"""On a released point (MLPerf ResNet-50, IPU-POD16, run with half partials), the sensitivity
that `explain` prints for `plan.partials` is the simulator's own figure for the float-partials
plan: nothing hard-coded, and the same as the calibration's prediction of that point."""

from __future__ import annotations

import copy
from dataclasses import replace

import optuna
import pytest

from ipu_tune.calibration import default_points, predict
from ipu_tune.case import build_case
from ipu_tune.cli.explain_cmd import format_sensitivity
from ipu_tune.explain import sensitivity
from ipu_tune.simulator import simulate
from tests.search._helpers import compose_cfg, make_problem

optuna.logging.set_verbosity(optuna.logging.WARNING)

# The point `mlperf_resnet50_pod16` of ipu_tune/calibration/points.yaml as overrides.
POD16 = ("model=resnet50", "system=pod16", "search=throughput",
         "model.dataset.preprocess_s_per_sample=0.0025", "workload.micro_batch_size=20",
         "workload.optimizer=momentum", "plan.precision=16.16", "plan.partials=half",
         "plan.gradient_accumulation=10", "plan.replication_factor=16",
         "plan.host_instances=8", "plan.device_iterations=50", "plan.eight_bit_io=true",
         "plan.available_memory_proportion=0.15", "plan.recompute=checkpoints",
         "plan.async_dataloader=true", "plan.dataloader_workers=16", "plan.prefetch_depth=3",
         "plan.pipeline.splits=[]")
PINNED = ("plan.replication_factor", "plan.host_instances", "plan.pipeline.splits")


def test_partials_row_on_a_released_point_is_the_simulated_float_partials_plan() -> None:
    problem = make_problem(compose_cfg(*POD16), PINNED)
    cfg = problem.codec.user
    (point,) = [p for p in default_points() if p.name == "mlperf_resnet50_pod16"]
    (pred,) = predict([point])
    base = problem.evaluate(cfg).result
    assert base.throughput == pytest.approx(pred.result.throughput, rel=1e-9)  # same point
    rows = [r for r in sensitivity(problem, cfg) if r["key"] == "plan.partials"]
    assert [r["value"] for r in rows] == ["float"]
    case = build_case(point.config)
    as_float = simulate(case.profile, case.system, replace(case.plan, partials="float"))
    expected = 100.0 * (as_float.throughput / pred.result.throughput - 1.0)
    assert rows[0]["change_pct"] == pytest.approx(expected, rel=1e-9)
    # Float partials run the AMP at half rate: slower, but far from half the samples/s,
    # since the memory-bound vertices and the exchange do not change.
    assert -50.0 < rows[0]["change_pct"] < -5.0
    printed = "\n".join(format_sensitivity(rows))
    assert f"{rows[0]['change_pct']:+.1f}%" in printed and "float" in printed


def test_partials_row_follows_the_simulator_constants() -> None:
    """With a different AMP efficiency the printed figure changes: it is simulated."""
    problem = make_problem(compose_cfg(*POD16), PINNED)
    cfg = copy.deepcopy(problem.codec.user)
    rows = [r for r in sensitivity(problem, cfg) if r["key"] == "plan.partials"]
    (point,) = [p for p in default_points() if p.name == "mlperf_resnet50_pod16"]
    case = build_case(point.config)
    half = simulate(case.profile, case.system, case.plan)
    flt = simulate(case.profile, case.system, replace(case.plan, partials="float"))
    assert rows[0]["throughput"] == pytest.approx(flt.throughput, rel=1e-9)
    assert flt.phases["compute"] > half.phases["compute"]
    assert flt.phases["exchange"] == pytest.approx(half.phases["exchange"], rel=0.05)
