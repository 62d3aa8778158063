"""What if: one knob of a plan one step up and down (sensitivity), and remedies when nothing fits.

Every figure here is a simulation of the changed plan (the same `SearchProblem.evaluate` the
trials ran), never an extrapolation. The memory remedies are the Graph Analyser's own list
(seed hands-on session, "Reducing memory usage"): a smaller batch, FP16, recomputation,
offloading, the available memory proportion, more pipeline stages.
"""

from __future__ import annotations

import copy
from typing import Any

from ipu_tune.config import EvalConfig, to_plain_dict
from ipu_tune.knobs import KNOBS, Knob, get_key, set_key
from ipu_tune.search import SearchProblem, TrialOutcome, even_split

__all__ = ["remedies", "sensitivity"]

MB = 1e6
_AMP_STEP = 0.1  # one step of the available memory proportion (seed guide 5.4 uses 0.1s)


def _with(cfg: EvalConfig, **changes: Any) -> EvalConfig:
    out = copy.deepcopy(cfg)
    for key, value in changes.items():
        set_key(out, key.replace("__", "."), value)
    return out


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
        return [x for x in (v // 2, v * 2) if x >= max(1, k.low) and x != v]
    return []


def _moot(k: Knob, cfg: EvalConfig, tokens: bool) -> bool:
    training = cfg.workload.mode == "train"
    return (not k.change or k.draw in ("splits", "replicas", "")
            or (k.training_only and not training) or (k.image_only and tokens)
            or (k.condition == "pipelined" and not cfg.plan.pipeline.splits)
            or (k.condition == "replicated" and cfg.plan.replication_factor < 2))


def _row(problem: SearchProblem, cfg: EvalConfig, base: TrialOutcome, label: str,
         key: str, value: Any) -> dict[str, Any]:
    o = problem.evaluate(cfg)
    r = o.result
    invalid = r.bottleneck == "invalid plan"
    base_tp = base.result.throughput
    return {
        "knob": label, "key": key, "value": value,
        "valid": not invalid, "fits": bool(r.fits), "feasible": o.feasible,
        "searched": problem.searches(key, value),  # False: the study could not draw it
        "throughput": float(r.throughput),
        "change_pct": (100.0 * (r.throughput / base_tp - 1.0)
                       if r.fits and base_tp > 0 else None),
        "peak_memory_bytes": int(max(r.memory_per_ipu, default=0)),
        "reason": r.reason,
    }


def sensitivity(problem: SearchProblem, cfg: EvalConfig) -> list[dict[str, Any]]:
    """Each knob of `cfg` one step down and up: fits, samples/s and the change against `cfg`.

    Also each pipeline cut one block earlier and later, and the replicas doubled and halved
    on the same IPUs (with the stages halved or doubled), when the plan rules allow them."""
    base = problem.evaluate(cfg)
    tokens = problem.profile.input_kind == "tokens"
    rows: list[dict[str, Any]] = []
    for k in KNOBS:
        if _moot(k, cfg, tokens):
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
    key = "plan.replication_factor"
    if stages % 2 == 0:
        fewer = splits[1::2]  # stages 2k-1 and 2k merge
        out.append(("replicas", key, _layout(replicas * 2, stages // 2),
                    _with(cfg, plan__replication_factor=replicas * 2,
                          plan__pipeline__splits=fewer)))
    if replicas % 2 == 0 and stages * 2 <= len(blocks):
        starts = even_split(len(blocks), stages * 2)
        out.append(("replicas", key, _layout(replicas // 2, stages * 2),
                    _with(cfg, plan__replication_factor=replicas // 2,
                          plan__pipeline__splits=[blocks[b] for b in starts[1:]])))
    return out


def _memory_line(o: TrialOutcome) -> str:
    r = o.result
    peak = max(r.memory_per_ipu, default=0)
    return f"{peak / MB:,.0f}/{r.memory_limit_bytes / MB:,.0f} MB"


def _largest_micro_batch(problem: SearchProblem, cfg: EvalConfig,
                         training: bool) -> tuple[str, EvalConfig] | None:
    """The largest micro-batch below `cfg`'s (halving) that fits, GA raised to keep the batch."""
    mb, ga = cfg.workload.micro_batch_size, cfg.plan.gradient_accumulation
    m = mb // 2
    while m >= 1:
        ch: dict[str, Any] = {"workload__micro_batch_size": m}
        label = f"micro-batch {mb} -> {m}"
        if training and mb % m == 0:
            ch["plan__gradient_accumulation"] = ga * (mb // m)
            label += f" (GA {ga} -> {ga * (mb // m)}, same global batch)"
        cand = _with(cfg, **ch)
        if problem.evaluate(cand).result.fits:
            return label, cand
        m //= 2
    return None


def remedies(problem: SearchProblem, cfg: EvalConfig,
             user: EvalConfig | None = None) -> list[dict[str, Any]]:
    """Changes to a plan that does not fit, each simulated: does it fit, at what samples/s.

    Tried: the largest smaller micro-batch that fits (gradient accumulation raised to keep the
    global batch when training; from `user`'s plan when none fits from `cfg`), the fewest
    pipeline stages over this system's IPUs that fit,
    and single memory savers (FP16, recomputation, offloading, sharding, a lower AMP).
    """
    training = cfg.workload.mode == "train"
    out: list[dict[str, Any]] = []

    def add(label: str, cand: EvalConfig) -> None:
        o = problem.evaluate(cand)
        if o.result.bottleneck == "invalid plan":
            return
        out.append({"remedy": label, "fits": bool(o.result.fits),
                    "throughput": float(o.result.throughput),
                    "memory": _memory_line(o), "reason": o.result.reason,
                    "config": to_plain_dict(cand)})

    for origin, plan in (("", cfg), (" (from your plan)", user)):
        if plan is None:
            continue
        found = _largest_micro_batch(problem, plan, training)
        if found is not None:
            add(f"largest micro-batch that fits{origin}: {found[0]}", found[1])
            break
    ipus = cfg.system.num_ipus
    blocks = problem.profile.blocks
    stages = 2
    while stages <= min(ipus, len(blocks)):
        starts = even_split(len(blocks), stages)
        splits = [blocks[i] for i in starts[1:]]
        cand = _with(cfg, plan__pipeline__splits=splits,
                     plan__replication_factor=max(1, ipus // stages))
        if problem.evaluate(cand).result.fits:
            add(f"fewest pipeline stages that fit: {stages} (splits {', '.join(splits)}, "
                f"{max(1, ipus // stages)} replicas)", cand)
            break
        stages *= 2
    savers: list[tuple[str, dict[str, Any]]] = [
        ("precision 16.16", {"plan__precision": "16.16"}),
        ("available memory proportion 0.3", {"plan__available_memory_proportion": 0.3}),
    ]
    if training:
        savers += [
            ("recompute checkpoints", {"plan__recompute": "checkpoints"}),
            ("offload the optimizer state", {"plan__offload_optimizer_state": True}),
        ]
        if cfg.plan.replication_factor > 1:
            savers.append(("replicated tensor sharding",
                           {"plan__replicated_tensor_sharding": True}))
    for label, ch in savers:
        if all(get_key(cfg, k.replace("__", ".")) == v for k, v in ch.items()):
            continue
        add(label, _with(cfg, **ch))
    together: dict[str, Any] = {}
    for _, ch in savers:
        together.update(ch)
    add("all the savers above together", _with(cfg, **together))
    return out
