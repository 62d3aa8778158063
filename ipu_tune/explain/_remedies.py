"""Remedies when no plan fits: changes that lower memory, each simulated, each a command.

The memory remedies are the Graph Analyser's own list (seed hands-on session, "Reducing memory
usage"): a smaller batch, FP16, recomputation, offloading, the available memory proportion,
more pipeline stages. Each is tried on the user's plan and on the closest plan the study
found, only in the direction that saves memory (never a higher available memory proportion,
never a weaker recomputation), and kept only when the simulator shows its peak memory lower
than the plan it changes. Each row carries the `key=value` overrides that turn the user's
plan into it, so the summary can print a command to paste; rows are ordered by what fits
first, then the fewest overrides, then the most samples/s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from ipu_tune import interrupts
from ipu_tune.case import build_case, head_stages, simulate_case
from ipu_tune.config import (
    LIMITS,
    EvalConfig,
    at_one_proportion_if_moved,
    at_pipeline_minimum,
    to_plain_dict,
    validate,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS, get_key, set_key, shown
from ipu_tune.plan import plan_from_config
from ipu_tune.search import (
    SearchProblem,
    StageCostModel,
    TrialOutcome,
    balanced_split,
    even_split,
)
from ipu_tune.simulator import SimResult

__all__ = ["larger_system", "override_text", "remedies"]

MB = 1e6
# Recomputation from the least to the most memory saved (`auto` is PopTorch's default: none
# unpinned, pipeline recomputation when pipelined; seed guide 4.2).
_RECOMPUTE = ("none", "auto", "checkpoints", "every_block")
_LOWEST_AMP = 0.1  # the lowest available memory proportion the presets search
# Shares of an IPU's memory the split planner is given per stage (`larger_system`).
_PLANNER_SHARES = (1.0, 0.85, 0.7, 0.55)


def _with(cfg: EvalConfig, changes: dict[str, Any]) -> EvalConfig:
    out = copy.deepcopy(cfg)
    for key, value in changes.items():
        set_key(out, key, value)
    return at_one_proportion_if_moved(out, changes)


def override_text(key: str, value: Any) -> str:
    """`key=value` as Hydra's command line reads it back (lists in brackets, lower-case bools)."""
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, list | tuple):
        shown = "[" + ",".join(map(str, value)) + "]"
    elif isinstance(value, float):
        shown = f"{value:g}"
    else:
        shown = str(value)
    return f"{key}={shown}"


def _overrides(user: EvalConfig, cand: EvalConfig) -> list[str]:
    """The overrides turning the user's plan into `cand` (every knob that differs)."""
    out = []
    for k in KNOBS:
        have, want = get_key(user, k.key), get_key(cand, k.key)
        if isinstance(have, list | tuple) or isinstance(want, list | tuple):
            have, want = list(have), list(want)
        if have != want:
            out.append(override_text(k.key, want))
    return out


def _smaller_batches(cfg: EvalConfig, training: bool) -> Iterator[tuple[str, dict[str, Any]]]:
    """Micro-batch halved down to 1, gradient accumulation raised to keep the global batch."""
    mb, ga = cfg.workload.micro_batch_size, cfg.plan.gradient_accumulation
    m = mb // 2
    while m >= 1:
        ch: dict[str, Any] = {"workload.micro_batch_size": m}
        label = f"micro-batch {mb} -> {m}"
        if training and mb % m == 0:
            ch["plan.gradient_accumulation"] = ga * (mb // m)
            label += f" (GA {ga} -> {ga * (mb // m)}, same global batch)"
        yield label, ch
        m //= 2


def _savers(cfg: EvalConfig, training: bool) -> list[tuple[str, dict[str, Any]]]:
    """Single memory savers that lower memory from `cfg` (none that raises it)."""
    p = cfg.plan
    out: list[tuple[str, dict[str, Any]]] = []
    if p.precision != "16.16":
        out.append((f"precision {p.precision} -> 16.16", {"plan.precision": "16.16"}))
    amps = list(p.available_memory_proportion_per_ipu) or [p.available_memory_proportion]
    if max(amps) > _LOWEST_AMP + 1e-9:  # on every IPU (`_with` drops a per-IPU list)
        out.append((f"available memory proportion {shown(amps[0] if len(amps) == 1 else amps)}"
                    f" -> {_LOWEST_AMP:g}",
                    {"plan.available_memory_proportion": _LOWEST_AMP}))
    if training:
        now = _RECOMPUTE.index(p.recompute)
        effective = max(now, _RECOMPUTE.index("checkpoints")) if p.pipeline.splits else now
        for mode in _RECOMPUTE[effective + 1:]:
            if mode != "auto":
                out.append((f"recompute {p.recompute} -> {mode}", {"plan.recompute": mode}))
        if not p.offload_optimizer_state:
            out.append(("offload the optimizer state", {"plan.offload_optimizer_state": True}))
        if p.replication_factor > 1 and not p.replicated_tensor_sharding:
            out.append(("replicated tensor sharding", {"plan.replicated_tensor_sharding": True}))
    if p.io_tiles:  # I/O tiles hold no model: the compute tiles hold it all
        out.append((f"I/O tiles {p.io_tiles} -> 0", {"plan.io_tiles": 0}))
    return out


def _stages(problem: SearchProblem, cfg: EvalConfig) -> Iterator[tuple[str, dict[str, Any]]]:
    """The plan's stages evenly split (when its split is uneven), then more stages (powers of
    two), evenly split, over the system's IPUs; each labelled by what it changes."""
    ipus, blocks = cfg.system.num_ipus, problem.profile.blocks
    now = len(cfg.plan.pipeline.splits) + 1
    stages = now if now > 1 else 2
    while stages <= min(ipus, len(blocks)):
        splits = [blocks[i] for i in even_split(len(blocks), stages)[1:]]
        replicas = max(1, ipus // stages)
        if list(cfg.plan.pipeline.splits) != splits:
            changes = {"plan.pipeline.splits": splits, "plan.replication_factor": replicas}
            yield _at_minimum(problem, cfg, _stage_label(cfg, splits, replicas), changes)
        stages *= 2


def _at_minimum(problem: SearchProblem, cfg: EvalConfig, label: str,
                changes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A new split with the gradient accumulation (inference: device iterations) raised to
    the least PopTorch compiles for its stages, as the search draws it: a deeper pipeline below
    that minimum is no plan, and the label says the raise its command runs."""
    cand = _with(cfg, changes)
    at_pipeline_minimum(cand, head_stages(problem.profile, cand))
    for key, name in (("plan.gradient_accumulation", "GA"), ("plan.device_iterations", "DI")):
        before, after = get_key(cfg, key), get_key(cand, key)
        if after != before:
            changes = {**changes, key: after}
            label += f", {name} {before} -> {after} (the pipeline's minimum)"
    return label, changes


def _stage_label(cfg: EvalConfig, splits: list[str], replicas: int) -> str:
    """What a new pipeline split changes: the stage count or, at the same count, where the
    stages are cut (the cuts are named up to 3 a side), and the replicas when they change."""
    old = list(cfg.plan.pipeline.splits)
    before, after = len(old) + 1, len(splits) + 1

    def cuts(names: list[str]) -> str:
        return ", ".join(names) if len(names) <= 3 else f"{len(names)} cuts"

    if before == after:
        label = f"pipeline split {cuts(old)} -> {cuts(splits)} ({after} stages, evenly split)"
    else:
        label = f"pipeline stages {before} -> {after} (evenly split"
        label += f" at {cuts(splits)})" if len(splits) <= 3 else ")"
    if replicas != cfg.plan.replication_factor:
        label += f", replicas {cfg.plan.replication_factor} -> {replicas}"
    return label


def _peak(o: TrialOutcome) -> float:
    return max(o.result.memory_per_ipu, default=0)


def _from(problem: SearchProblem, origin: EvalConfig, user: EvalConfig,
          where: str, ceiling_bytes: float) -> list[dict[str, Any]]:
    """The remedies tried on `origin`: each single saver, the largest smaller micro-batch that
    fits, the fewest stages that fit, and the savers together when no single one fits. A
    remedy must peak below `origin`'s memory; an invalid `origin` has none, so below
    `ceiling_bytes` (the closest plan's peak): never a remedy worse than what the study found."""
    training = origin.workload.mode == "train"
    base = problem.evaluate(origin)
    ref = ceiling_bytes if base.result.bottleneck == "invalid plan" else _peak(base)
    rows: list[dict[str, Any]] = []

    def tried(label: str, changes: dict[str, Any]) -> dict[str, Any] | None:
        cand = _with(origin, changes)
        o = problem.evaluate(cand)
        r = o.result
        if r.bottleneck == "invalid plan" or _peak(o) >= ref:
            return None  # not a plan, or no memory saved: no remedy
        return _row(label + where, r, cand, _overrides(user, cand))

    for group in (_smaller_batches(origin, training), _stages(problem, origin)):
        last = None
        for label, ch in group:  # the first that fits, else the last (the most saving) tried
            last = tried(label, ch) or last
            if last is not None and last["fits"]:
                break
        if last is not None:
            rows.append(last)
    savers = [(label, ch, row) for label, ch in _savers(origin, training)
              if (row := tried(label, ch)) is not None]  # each saves memory alone
    rows += [row for _, _, row in savers]
    if len(savers) > 1 and not any(row["fits"] for _, _, row in savers):
        row = _together(savers, tried)
        if row is not None:
            rows.append(row)
    return rows


def _together(savers: list[tuple[str, dict[str, Any], dict[str, Any]]],
              tried: Callable[[str, dict[str, Any]], dict[str, Any] | None],
              ) -> dict[str, Any] | None:
    """The savers (label, changes, row alone) as one change, built up from the one that saves
    most alone: another joins only when the change then peaks lower still (savers interact:
    recomputing every block of a one-block model adds code and saves nothing), so together
    never peaks above the best of them alone. None: no two lower it together."""
    ranked = sorted(savers, key=lambda s: s[2]["peak_memory_bytes"])
    chosen, best = [ranked[0][:2]], ranked[0][2]
    for label, ch, _ in ranked[1:]:
        row = tried(*_merged([*chosen, (label, ch)]))
        if row is not None and row["peak_memory_bytes"] < best["peak_memory_bytes"]:
            chosen, best = [*chosen, (label, ch)], row
    return best if len(chosen) > 1 else None


def _merged(savers: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """The savers as one change. Of savers of one knob the last sets it, and only the savers
    whose values the change keeps are named, so the label says what its command runs."""
    last = {key: i for i, (_, ch) in enumerate(savers) for key in ch}
    kept = [(label, ch) for i, (label, ch) in enumerate(savers)
            if all(last[key] == i for key in ch)]
    changes = {key: value for _, ch in kept for key, value in ch.items()}
    return "together: " + ", ".join(label for label, _ in kept), changes


def remedies(problem: SearchProblem, cfg: EvalConfig,
             user: EvalConfig | None = None) -> list[dict[str, Any]]:
    """Changes that lower the memory of `cfg` (the closest plan) and of `user`'s plan, each
    simulated: fits, samples/s, peak memory and the overrides from `user`'s plan; fitting ones
    first, then the fewest overrides, then the most samples/s (module docstring)."""
    user = user if user is not None else cfg
    closest_peak = _peak(problem.evaluate(cfg))
    rows = _from(problem, user, user, "", closest_peak) if user is not cfg else []
    rows += _from(problem, cfg, user, " (on the closest plan)", closest_peak)
    if not any(row["fits"] for row in rows):  # nothing on this system: the fewest IPUs
        bigger = larger_system(problem, cfg, user)
        rows += [bigger] if bigger is not None else []
    seen: set[tuple[str, ...]] = set()
    out = []
    for row in sorted(rows, key=lambda r: (not r["fits"], len(r["overrides"]),
                                           -r["throughput"], r["peak_memory_bytes"])):
        key = tuple(row["overrides"])
        if key and key not in seen:
            seen.add(key)
            out.append(row)
    return out


def larger_system(problem: SearchProblem, cfg: EvalConfig,
                  user: EvalConfig | None = None) -> dict[str, Any] | None:
    """When nothing fits on this system: the fewest IPUs of its kind (powers of two) on which
    `cfg` fits with every memory saver on, one pipeline stage per IPU up to the model's blocks
    (split by the search's balanced planner), the other IPUs replicas; then without each saver
    that lowers nothing there (`_lean`). A row as `remedies` gives, its overrides starting with
    `system.num_ipus` and `larger_system` true. When none fits, the row of the most stages the
    model has (more IPUs than that only add replicas, which hold the same weights); None when
    not even that is a plan."""
    user = user if user is not None else cfg
    training = cfg.workload.mode == "train"
    most = min(len(problem.profile.blocks), LIMITS["system.num_ipus"])
    ipus = cfg.system.num_ipus * 2
    found: tuple[dict[str, Any], EvalConfig, list[tuple[str, dict[str, Any]]], int, int] | None
    found = None
    while ipus <= LIMITS["system.num_ipus"]:
        stages = 1 << (min(ipus, most).bit_length() - 1)  # a power of two <= both
        cand = _with(cfg, {"system.num_ipus": ipus, "plan.replication_factor": ipus // stages})
        savers = _savers(cand, training)
        cand = _with(cand, {k: v for _, ch in savers for k, v in ch.items()})
        # The planner's memory estimate leaves out code and buffers: ask it for less memory
        # per stage until the simulator says a split fits. Pipelined first (the plan's
        # schedule, or grouped), then sharded: one stage at a time, no accumulation or stash,
        # the least memory when pipelining does not fit.
        piped = cand.plan.pipeline.schedule
        for schedule in (piped if piped != "sharded" else "grouped", "sharded"):
            for share in _PLANNER_SHARES:
                interrupts.check()  # a deep model plans for seconds: Ctrl-C stops here
                split = _split(problem, _with(cand, {"plan.pipeline.schedule": schedule}),
                               stages, share * problem.system.ipu.sram_bytes)
                row = _simulated(problem, split, user, ipus, stages)
                if row is None:
                    continue
                found = (row, split, savers, ipus, stages)
                if row["fits"]:
                    return _lean(problem, user, cfg, *found)
        if stages * 2 > most:
            break
        ipus *= 2
    return _lean(problem, user, cfg, *found) if found is not None else None


def _lean(problem: SearchProblem, user: EvalConfig, base: EvalConfig, row: dict[str, Any],
          cand: EvalConfig, savers: list[tuple[str, dict[str, Any]]], ipus: int,
          stages: int) -> dict[str, Any]:
    """`row` of `cand` without each of `base`'s savers whose undoing keeps it fitting as it
    did and peaks no higher (recomputing every block of a model of one block only adds code):
    a remedy holds no change that costs memory or speed for nothing."""
    for _, changes in savers:
        undone = _with(cand, {k: get_key(base, k) for k in changes})
        other = _simulated(problem, undone, user, ipus, stages)
        if (other is not None and other["fits"] >= row["fits"]
                and other["peak_memory_bytes"] <= row["peak_memory_bytes"]):
            row, cand = other, undone
    return row


def _split(problem: SearchProblem, cfg: EvalConfig, stages: int,
           limit_bytes: float) -> EvalConfig:
    """`cfg` with `stages` pipeline stages balanced within `limit_bytes` each (the search's
    planner); pipelined, gradient accumulation (inference: device iterations) at least the
    stages, as PopTorch compiles it."""
    blocks = problem.profile.blocks
    if stages == 1:
        return _with(cfg, {"plan.pipeline.splits": []})
    model = StageCostModel(problem.profile, plan_from_config(cfg))
    starts = balanced_split(model, stages, limit_bytes)
    changes: dict[str, Any] = {"plan.pipeline.splits": [blocks[i] for i in starts[1:]]}
    out = _with(cfg, changes)
    return at_pipeline_minimum(out, head_stages(problem.profile, out))


def _simulated(problem: SearchProblem, cand: EvalConfig, user: EvalConfig, ipus: int,
               stages: int) -> dict[str, Any] | None:
    try:
        validate(cand)
        r = simulate_case(build_case(cand, problem.profile), problem.constants)
    except IpuTuneError:
        return None
    label = (f"{ipus} {cand.system.ipu} IPUs ({stages} pipeline stages x {ipus // stages} "
             "replicas, the memory savers that lower its peak)")
    overrides = [f"system.num_ipus={ipus}", *_overrides(user, cand)]
    return {**_row(label, r, cand, overrides), "larger_system": True}


def _row(label: str, r: SimResult, cand: EvalConfig, overrides: list[str]) -> dict[str, Any]:
    """A remedy as the summary and the report show it: the simulated verdict of `cand` and
    the overrides that run it."""
    peak = max(r.memory_per_ipu, default=0)
    return {"remedy": label, "fits": bool(r.fits), "throughput": float(r.throughput),
            "memory": f"{peak / MB:,.0f}/{r.memory_limit_bytes / MB:,.0f} MB",
            "peak_memory_bytes": int(peak), "reason": r.reason, "overrides": overrides,
            "config": to_plain_dict(cand)}
