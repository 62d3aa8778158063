"""`explain` shows where the step goes: each phase's share and the all-reduce terms, each with
its source or "estimate"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.calibration import default_points
from ipu_tune.case import build_case
from ipu_tune.cli.explain_cmd import format_phases
from ipu_tune.explain import phase_shares
from ipu_tune.hardware import make_system
from ipu_tune.simulator import ALL_REDUCE_TERMS, TIME_PHASES, simulate


def _pod64_point_on(num_ipus: int) -> tuple[object, ...]:
    (point,) = [p for p in default_points() if p.name == "mlperf_resnet50_pod64"]
    case = build_case(point.config)
    system = make_system("mk2", num_ipus, hosts=num_ipus // 16)
    plan = replace(case.plan, replication_factor=num_ipus, host_instances=num_ipus // 2)
    return case.profile, system, plan


def test_phase_shares_sum_to_the_step_and_terms_carry_their_sources() -> None:
    profile, system, plan = _pod64_point_on(128)  # two PODs: GW-Link terms too
    r = simulate(profile, system, plan)  # type: ignore[arg-type]
    rows = phase_shares(r)
    phases = [x for x in rows if x["phase"] in TIME_PHASES]
    terms = {x["phase"].split(".", 1)[1]: x for x in rows if x["phase"] not in TIME_PHASES}
    assert sum(x["share"] for x in phases) == pytest.approx(1.0)
    assert {"pod_bandwidth_s", "pod_sync_s", "gw_bandwidth_s", "gw_latency_s"} <= set(terms)
    assert terms["pod_bandwidth_s"]["seconds"] + terms["pod_sync_s"]["seconds"] == (
        pytest.approx(r.phases["all_reduce_pod"]))
    assert terms["gw_bandwidth_s"]["seconds"] + terms["gw_latency_s"]["seconds"] == (
        pytest.approx(r.phases["all_reduce_gw"]))
    for name, row in terms.items():
        assert row["source"] == ALL_REDUCE_TERMS[name]
    assert "estimate" in terms["gw_latency_s"]["source"]
    printed = "\n".join(format_phases(rows))
    assert "all_reduce_terms.gw_latency_s" in printed and "estimate" in printed


def test_one_pod_has_no_gw_link_terms() -> None:
    profile, system, plan = _pod64_point_on(64)
    rows = phase_shares(simulate(profile, system, plan))  # type: ignore[arg-type]
    names = [x["phase"] for x in rows]
    assert "all_reduce_pod" in names and "all_reduce_gw" not in names
    assert not [n for n in names if n.startswith("all_reduce_terms.gw")]
