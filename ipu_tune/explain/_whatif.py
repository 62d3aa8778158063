"""What if: one knob of a plan one step up and down (sensitivity of the best plan).

Every figure here is a simulation of the changed plan (the same `SearchProblem.evaluate` the
trials ran), never an extrapolation. The remedies when nothing fits: `_remedies`.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from ipu_tune.case import head_stages
from ipu_tune.config import EvalConfig, at_one_proportion_if_moved, at_pipeline_minimum
from ipu_tune.knobs import KNOBS, Knob, get_key, moot_keys, set_key
from ipu_tune.search import OBJECTIVES, SearchProblem, TrialOutcome, even_split

__all__ = ["sensitivity"]

MB = 1e6
_REPLICAS = "plan.replication_factor"
_AMP_STEP = 0.1  # one step of the available memory proportion (seed guide 5.4 uses 0.1s)


def _with(cfg: EvalConfig, **changes: Any) -> EvalConfig:
    out = copy.deepcopy(cfg)
    keys = [key.replace("__", ".") for key in changes]
    for key, value in zip(keys, changes.values(), strict=True):
        set_key(out, key, value)
    return at_one_proportion_if_moved(out, keys)


def _neighbours(k: Knob, v: Any) -> list[Any]:
    """One step down and one step up of knob `k` from value `v` (invalid ones dropped later)."""
    if k.type is bool:
        return [not v]
    domain = k.search_domain or k.domain
    if domain is not None and v in domain:
        i = domain.index(v)
        return [domain[j] for j in (i - 1, i + 1) if 0 <= j < len(domain)]
    if k.type is float:
        hi = k.high if k.high is not None else 1.0
        return [x for x in (round(v - _AMP_STEP, 3), round(v + _AMP_STEP, 3)) if k.low < x <= hi]
    if k.type is int:
        top = k.high if k.high is not None else float("inf")
        return [x for x in (v // 2, v * 2) if max(1, k.low) <= x <= top and x != v]
    return []




def _row(problem: SearchProblem, cfg: EvalConfig, base: TrialOutcome, label: str,
         key: str, value: Any) -> dict[str, Any]:
    o = problem.evaluate(cfg)
    r = o.result
    invalid = r.bottleneck == "invalid plan"
    base_tp = base.result.throughput
    name = problem.objective_names[0]
    got, was = o.values[0], base.values[0]  # the study's first objective
    ok = r.fits and math.isfinite(got) and math.isfinite(was) and was != 0
    return {
        "knob": label, "key": key, "value": value,
        "valid": not invalid, "fits": bool(r.fits), "feasible": o.feasible,
        # False: the study could not draw it. Replicas are shown with their stages
        # ("2 (2 stages)"); the study drew the count.
        "searched": problem.searches(key, get_key(cfg, key) if key == _REPLICAS else value),
        "throughput": float(r.throughput),
        "change_pct": (100.0 * (r.throughput / base_tp - 1.0)
                       if r.fits and base_tp > 0 else None),
        "peak_memory_bytes": int(max(r.memory_per_ipu, default=0)),
        "reason": r.reason,
        # The study's first objective, when it is not throughput (a latency study's rows)
        "objective": name,
        "objective_shown": OBJECTIVES[name].show(got) if r.fits and math.isfinite(got) else "-",
        "objective_change_pct": 100.0 * (got / was - 1.0) if ok else None,
    }


def sensitivity(problem: SearchProblem, cfg: EvalConfig) -> list[dict[str, Any]]:
    """Each knob of `cfg` one step down and up: fits, samples/s and the change against `cfg`.

    Also each pipeline cut one block earlier and later, and the replicas doubled and halved
    on the same IPUs (with the stages halved or doubled), when the plan rules allow them."""
    base = problem.evaluate(cfg)
    moot = moot_keys(cfg, problem.codec.facts)  # knobs the plan does not run
    rows: list[dict[str, Any]] = []
    for k in KNOBS:
        # Not moved: a knob the plan does not run, the layout (its own moves below), or one
        # that is never searched.
        if k.key in moot or not k.change or k.draw in ("splits", "replicas", ""):
            continue
        v = get_key(cfg, k.key)
        for new in _neighbours(k, v):
            rows.append(_row(problem, _with(cfg, **{k.key.replace(".", "__"): new}), base,
                             k.label or k.key, k.key, new))
    for label, key, value, cand in (*_cut_moves(problem, cfg), *_replica_moves(problem, cfg)):
        row = _row(problem, cand, base, label, key, value)
        if row["valid"]:  # a move the plan rules refuse is no alternative
            rows.append(row)
    return rows


def _cut_moves(problem: SearchProblem,
               cfg: EvalConfig) -> list[tuple[str, str, Any, EvalConfig]]:
    """Each pipeline cut one block earlier and one later, when the stages stay non-empty."""
    blocks = list(problem.profile.blocks)
    splits = list(cfg.plan.pipeline.splits)
    if not splits or any(b not in blocks for b in splits):
        return []
    at = [blocks.index(b) for b in splits]
    out: list[tuple[str, str, Any, EvalConfig]] = []
    for i, j in enumerate(at):
        lo = at[i - 1] if i else 0  # the stage before keeps at least one block
        hi = at[i + 1] if i + 1 < len(at) else len(blocks)
        for new in (j - 1, j + 1):
            if lo < new < hi:
                moved = [*splits[:i], blocks[new], *splits[i + 1:]]
                out.append((f"pipeline cut {i + 1}", "plan.pipeline.splits", blocks[new],
                            _with(cfg, plan__pipeline__splits=moved)))
    return out


def _layout(replicas: int, stages: int) -> str:
    return f"{replicas} ({stages} stage{'' if stages == 1 else 's'})"


def _replica_moves(problem: SearchProblem,
                   cfg: EvalConfig) -> list[tuple[str, str, Any, EvalConfig]]:
    """Replicas x2 and /2 on the same IPUs (stages x replicas = IPUs, PopTorch's layout):
    twice the replicas on half the stages (every other cut kept), half the replicas on twice
    the stages (an even split, as the remedies)."""
    replicas = cfg.plan.replication_factor
    splits = list(cfg.plan.pipeline.splits)
    stages = len(splits) + 1
    blocks = list(problem.profile.blocks)
    out: list[tuple[str, str, Any, EvalConfig]] = []
    key = _REPLICAS
    if stages % 2 == 0:
        fewer = splits[1::2]  # stages 2k-1 and 2k merge
        out.append(("replicas", key, _layout(replicas * 2, stages // 2),
                    _with(cfg, plan__replication_factor=replicas * 2,
                          plan__pipeline__splits=fewer)))
    if replicas % 2 == 0 and stages * 2 <= len(blocks):
        starts = even_split(len(blocks), stages * 2)
        deeper = _with(cfg, plan__replication_factor=replicas // 2,
                       plan__pipeline__splits=[blocks[b] for b in starts[1:]])
        out.append(("replicas", key, _layout(replicas // 2, stages * 2),
                    at_pipeline_minimum(deeper, head_stages(problem.profile, deeper))))
    return out
