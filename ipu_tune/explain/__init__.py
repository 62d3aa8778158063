"""Explain a study: the optimisation ladder, sensitivity of the best, remedies when nothing fits.

`explain_study(study, problem)` returns one JSON-ready mapping (what `ipu-tune explain --json`
prints, what the summary and the report show):

- ``objective``/``metric``: the study's first objective and its Optuna metric name;
- ``best_trial``: the exported trial (None: no plan fits);
- ``start``: the label of step 0 ("seed tutorial plan" or "your plan", `start_label`);
- ``steps``: the ladder from the user's plan to the exported best (`ladder`);
- ``ladder_rank``: how each step's change was chosen (the rule that picked the export);
- ``sensitivity``: each knob of the best plan one step down and up;
- ``phases``: the best plan's step by phase and the all-reduce terms with their sources
  (`phase_shares`);
- ``closest``: when nothing fits, the trial closest to fitting, its excess and where, and
  ``remedies`` the simulator has checked.
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.trial import TrialState

from ipu_tune.config import load_config
from ipu_tune.explain._ladder import Rank, Step, differing_keys, ladder, rank_by, step_row
from ipu_tune.explain._phases import phase_shares
from ipu_tune.explain._start import SEED_LABEL, START_LABEL, start_label
from ipu_tune.explain._whatif import remedies, sensitivity
from ipu_tune.records import TrialRecord
from ipu_tune.search import OBJECTIVES, SearchProblem, compromise

__all__ = [
    "PARETO_RULE",
    "SEED_LABEL",
    "START_LABEL",
    "Rank",
    "Step",
    "closest_trial",
    "differing_keys",
    "explain_study",
    "ladder",
    "phase_shares",
    "rank_by",
    "remedies",
    "sensitivity",
    "start_label",
    "step_row",
]
# How `ipu_tune.search.best_trial` picks the exported trial of a multi-objective study.
PARETO_RULE = ("compromise: the trial of the feasible Pareto front closest to the ideal point, "
               "each objective scaled to [0, 1] over the front (compromise programming)")


def closest_trial(study: optuna.Study) -> tuple[int, TrialRecord] | None:
    """The finished trial nearest to fitting: the smallest memory excess (first constraint).

    Infeasible trials are PRUNED (`ipu_tune.search.tell_outcome`); older studies told them
    COMPLETE: both are read."""
    best: tuple[float, int, TrialRecord] | None = None
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        rec = TrialRecord.of(t)
        if not rec.constraints or not rec.config or rec.result.get("step_time_s") is None:
            continue
        key = rec.constraints[0]
        if math.isfinite(key) and (best is None or key < best[0]):
            best = (key, t.number, rec)
    return None if best is None else (best[1], best[2])


def _ladder_rank(problem: SearchProblem) -> str:
    """How the ladder picks each step's change: by the rule that picked the exported trial."""
    if len(problem.objective_names) > 1:
        return ("each step: the change whose plan is nearest the compromise ideal, the rule "
                "that picked the exported trial (" + PARETO_RULE + ")")
    o = OBJECTIVES[problem.objective_names[0]]
    best = "highest" if o.direction == "maximize" else "lowest"
    return (f"each step: the change with the {best} {o.title} among plans that fit, the rule "
            "that picked the exported trial (plans that do not fit: the smallest excess)")


def explain_study(study: optuna.Study, problem: SearchProblem,
                  with_sensitivity: bool = True) -> dict[str, Any]:
    name = problem.objective_names[0]
    best = problem.best_trial(study)
    values = list(best.values or []) if best is not None else []
    objectives = []
    for i, n in enumerate(problem.objective_names):
        o = OBJECTIVES[n]
        v = values[i] if i < len(values) else None
        objectives.append({"name": n, "metric": o.metric, "axis": o.axis(), "scale": o.scale,
                           "direction": o.direction, "best_value": v,
                           "best_shown": o.show(v) if v is not None else None})
    out: dict[str, Any] = {
        "study": study.study_name, "objective": name, "metric": OBJECTIVES[name].metric,
        "objectives": objectives,
        "rule": (PARETO_RULE if len(objectives) > 1 else f"the best {OBJECTIVES[name].title} "
                 "among the trials that fit"),
        "input_kind": problem.profile.input_kind,
        "start": start_label(problem.codec.user), "ladder_rank": _ladder_rank(problem),
        "best_trial": None, "steps": [], "sensitivity": [], "phases": [],
        "closest": None,
    }
    start = problem.codec.user
    if best is None:
        found = closest_trial(study)
        if found is not None:
            number, rec = found
            cfg = load_config(dict(rec.config))
            r = problem.evaluate(cfg).result
            peak = max(r.memory_per_ipu, default=0)
            out["closest"] = {
                "trial": number, "reason": r.reason,
                "peak_memory_bytes": int(peak), "memory_limit_bytes": int(r.memory_limit_bytes),
                "excess_bytes": int(max(0, peak - r.memory_limit_bytes)),
                "remedies": remedies(problem, cfg, start),
            }
        return out
    out["best_trial"] = best.number
    best_cfg = load_config(dict(TrialRecord.of(best).config))
    rule = compromise(study, problem.directions) if len(problem.directions) > 1 else None
    steps = ladder(problem, start, best_cfg, rank_by(problem, rule))
    first_fit = next((s.outcome.result.throughput for s in steps if s.outcome.result.fits), None)
    out["steps"] = [step_row(problem, s, first_fit, out["start"]) for s in steps]
    out["phases"] = phase_shares(problem.evaluate(best_cfg).result)
    if with_sensitivity:
        out["sensitivity"] = sensitivity(problem, best_cfg)
    return out
