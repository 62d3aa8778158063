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
from ipu_tune.simulator import ALL_REDUCE_TERM_PARTS, ALL_REDUCE_TERMS, simulate


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
    phases = [x for x in rows if "term" not in x]
    terms = {x["term"]: x for x in rows if "term" in x}
    assert sum(x["share"] for x in phases) == pytest.approx(1.0)
    labels = {label: (phase, name) for name, (phase, label) in ALL_REDUCE_TERM_PARTS.items()}
    assert {"IPU-Link bandwidth", "ring sync", "GW-Link bandwidth", "GW-Link latency"} <= set(terms)
    for phase in ("all_reduce_pod", "all_reduce_gw"):
        parts = [x["seconds"] for x in terms.values() if x["phase"] == phase]
        assert sum(parts) == pytest.approx(r.phases[phase])
    for label, row in terms.items():
        assert row["source"] == ALL_REDUCE_TERMS[labels[label][1]]
        assert row["phase"] == labels[label][0]
    assert "estimate" in terms["GW-Link latency"]["source"]
    printed = "\n".join(format_phases(rows))
    assert "    GW-Link latency" in printed and "estimate" in printed


def test_terms_are_parts_of_their_phase_not_extra_shares_of_the_step() -> None:
    """The terms of a collective are printed under it, named without a seconds suffix, and the
    percentages of the step's rows add up to 100."""
    profile, system, plan = _pod64_point_on(64)
    rows = phase_shares(simulate(profile, system, plan))  # type: ignore[arg-type]
    assert sum(x.get("share", 0.0) for x in rows) == pytest.approx(1.0)
    printed = format_phases(rows)
    assert not [line for line in printed if "_s " in line or "all_reduce_terms" in line]
    pod = next(i for i, line in enumerate(printed) if line.startswith("  all_reduce_pod"))
    assert printed[pod + 1].startswith("    IPU-Link bandwidth") and "of phase" in printed[pod + 1]
    step = [float(line.split("ms")[1].strip().rstrip("%")) for line in printed[2:]
            if line.startswith("  ") and not line.startswith("    ")]
    assert sum(step) == pytest.approx(100.0, abs=0.5)


def test_one_pod_has_no_gw_link_terms() -> None:
    profile, system, plan = _pod64_point_on(64)
    rows = phase_shares(simulate(profile, system, plan))  # type: ignore[arg-type]
    names = [x["phase"] for x in rows]
    assert "all_reduce_pod" in names and "all_reduce_gw" not in names
    assert not [x for x in rows if x["phase"] == "all_reduce_gw"]
