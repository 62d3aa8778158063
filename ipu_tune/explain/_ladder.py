"""The optimisation ladder, automated: from the user's plan to the study's best, one knob at a time.

The seed hands-on session (docs/references.md) starts from an out-of-memory plan and changes
one thing per step (half precision, gradient accumulation, device iterations, 8-bit I/O,
asynchronous loader), showing memory and speed after each. Here the
steps are the knobs in which the exported best differs from the user's plan; at each step the
change that gains most is applied first: a plan that fits beats one that does not, a plan
that does not fit gains by the smaller memory excess, and fitting plans by the study's first
objective. Knobs that are only valid together (e.g. pipeline splits and replicas, whose product
must match the IPUs) are applied as one step.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ipu_tune.config import EvalConfig, to_plain_dict
from ipu_tune.knobs import KNOBS, get_key, knob, set_key, shown
from ipu_tune.search import OBJECTIVES, Compromise, SearchProblem, TrialOutcome

__all__ = ["Rank", "Step", "differing_keys", "ladder", "objective_title", "rank_by", "step_row"]

# Larger is better: how the ladder orders the candidate changes of a step.
Rank = Callable[[TrialOutcome], tuple[float, float]]


@dataclass(frozen=True)
class Step:
    """One rung: the plan after `changes` were applied, and what the simulator says of it."""

    number: int
    changes: tuple[str, ...]  # "precision 32.32 -> 16.16"; empty for the starting plan
    config: EvalConfig
    outcome: TrialOutcome


def _value(v: Any) -> Any:
    return list(v) if isinstance(v, list | tuple) else v


def differing_keys(a: EvalConfig, b: EvalConfig) -> list[str]:
    """Knob keys whose values differ between `a` and `b`, in schema order."""
    return [k.key for k in KNOBS if _value(get_key(a, k.key)) != _value(get_key(b, k.key))]


def _label(key: str, old: Any, new: Any) -> str:
    k = knob(key)
    return f"{k.label or key.rsplit('.', 1)[-1]} {shown(old)} -> {shown(new)}"


def rank_by(problem: SearchProblem, rule: Compromise | None = None) -> Rank:
    """Feasible plans first, ranked by the rule that picked the exported trial: the first
    objective (one objective), or the distance to the compromise ideal (`rule`, several);
    infeasible plans by the least constraint excess."""
    sign = 1.0 if problem.directions[0] == "maximize" else -1.0

    def rank(o: TrialOutcome) -> tuple[float, float]:
        if not o.feasible or not all(math.isfinite(v) for v in o.values):
            return (0.0, -max(o.constraints, default=math.inf))
        if rule is not None:
            return (1.0, -rule.distance(o.values))
        return (1.0, sign * o.values[0])

    return rank


def _apply(cfg: EvalConfig, keys: tuple[str, ...], target: EvalConfig) -> EvalConfig:
    out = copy.deepcopy(cfg)
    for key in keys:
        set_key(out, key, copy.deepcopy(get_key(target, key)))
    return out


def _valid(problem: SearchProblem, cfg: EvalConfig) -> bool:
    return problem.evaluate(cfg).result.bottleneck != "invalid plan"


def ladder(problem: SearchProblem, start: EvalConfig, best: EvalConfig,
           rank: Rank | None = None) -> list[Step]:
    """The steps from `start` to `best` (step 0 is `start` itself; the last step is `best`);
    at each step the change `rank` puts first (default `rank_by(problem)`)."""
    score = rank or rank_by(problem)
    current = copy.deepcopy(start)
    steps = [Step(0, (), current, problem.evaluate(current))]
    remaining = differing_keys(current, best)
    while remaining:
        chosen: tuple[tuple[str, ...], EvalConfig, TrialOutcome] | None = None
        # One knob at a time; when no single knob gives a valid plan, the smallest group that does.
        for size in range(1, len(remaining) + 1):
            for group in itertools.combinations(remaining, size):
                cand = _apply(current, group, best)
                if not _valid(problem, cand):
                    continue
                outcome = problem.evaluate(cand)
                if chosen is None or score(outcome) > score(chosen[2]):
                    chosen = (group, cand, outcome)
            if chosen is not None or size >= 2:
                break
        if chosen is None:  # nothing smaller is valid: the rest in one step
            group = tuple(remaining)
            cand = _apply(current, group, best)
            chosen = (group, cand, problem.evaluate(cand))
        group, cand, outcome = chosen
        labels = tuple(_label(k, get_key(current, k), get_key(cand, k)) for k in group)
        current = cand
        steps.append(Step(len(steps), labels, current, outcome))
        remaining = differing_keys(current, best)
    return steps


def step_row(problem: SearchProblem, step: Step, first_fit_throughput: float | None,
             start_label: str) -> dict[str, Any]:
    """The JSON-ready row of a step (what `explain --json` prints and the report shows)."""
    r = step.outcome.result
    peak = max(r.memory_per_ipu, default=0)
    speedup = (r.throughput / first_fit_throughput
               if r.fits and first_fit_throughput else None)
    name = problem.objective_names[0]
    value = step.outcome.values[0] if step.outcome.values else math.nan
    return {
        "step": step.number,
        "change": ", ".join(step.changes) if step.changes else start_label,
        "changes": list(step.changes),
        "fits": bool(r.fits),
        "peak_memory_bytes": int(peak),
        "memory_limit_bytes": int(r.memory_limit_bytes),
        "throughput": float(r.throughput),
        "speedup": speedup,
        "bottleneck": r.bottleneck,
        "reason": r.reason,
        "objective": name,
        "objective_value": value if math.isfinite(value) else None,
        "objective_shown": OBJECTIVES[name].show(value) if math.isfinite(value) else "-",
        "config": to_plain_dict(step.config),
    }


def objective_title(row: Mapping[str, Any]) -> str:
    """The title of the column a ladder or sensitivity row's objective gets beside samples/s
    (`objective_shown`): "" for a throughput study, whose samples/s column already is it.
    `explain` and the report both ask here, so they show the same columns."""
    name = row.get("objective", "throughput")
    return "" if name == "throughput" or name not in OBJECTIVES else OBJECTIVES[name].title
