"""`explain_study`: a study's ladder, the sensitivity of its best plan, remedies when nothing fits.

It returns one frozen `Explanation`: what `ipu-tune explain` prints (`to_json` for `--json`),
what the run summary and the report show.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from ipu_tune.config import EvalConfig
from ipu_tune.explain._ladder import ladder, rank_by, step_row
from ipu_tune.explain._phases import phase_shares
from ipu_tune.explain._remedies import remedies
from ipu_tune.explain._start import start_label
from ipu_tune.explain._whatif import sensitivity
from ipu_tune.knobs import ModelFacts
from ipu_tune.records import TrialRecord
from ipu_tune.search import (
    OBJECTIVES,
    SearchProblem,
    check_stored_trials,
    compromise,
    stored_config,
)

__all__ = [
    "INVALID_PLAN", "PARETO_RULE", "Closest", "Explanation", "closest_trial", "explain_study",
    "invalid_start", "no_plan_headline",
]

INVALID_PLAN = "invalid plan"  # the simulator's bottleneck of a plan the plan rules refuse

# How `ipu_tune.search.best_trial` picks the exported trial of a multi-objective study.
PARETO_RULE = ("compromise: the trial of the feasible Pareto front closest to the ideal point, "
               "each objective scaled to [0, 1] over the front (compromise programming)")

Row = Mapping[str, Any]  # one JSON-ready table row (a ladder step, a sensitivity or remedy row)


@dataclass(frozen=True)
class Closest:
    """When nothing fits: the trial nearest to fitting, by how much and why, and the remedies
    the simulator checked on its plan."""

    trial: int
    reason: str
    peak_memory_bytes: int
    memory_limit_bytes: int
    excess_bytes: int  # the peak over the IPU's SRAM (0: within it, or over only by a tile)
    remedies: tuple[Row, ...]
    overflows: bool  # over the IPU's memory, in bytes or by a tile
    # What the trials that fit in memory miss (`no_plan_headline`); empty: none fits in memory.
    missed: tuple[str, ...] = ()

    @property
    def headline(self) -> str:
        """Why no plan is exported: memory, or what the trials that fit in it miss."""
        return _headline(self.missed)

    def describe(self) -> str:
        """The trial, its peak against the IPU's memory, and what it misses."""
        peak = (f"{self.peak_memory_bytes / 1e6:,.0f} MB of {self.memory_limit_bytes / 1e6:,.0f}"
                " MB per IPU")
        if self.excess_bytes > 0:
            return (f"trial {self.trial}, peak {peak} (over by {self.excess_bytes / 1e6:,.0f} MB)"
                    f": {self.reason}")
        if self.overflows:
            return f"trial {self.trial}, peak {peak}, but a tile overflows: {self.reason}"
        return (f"trial {self.trial}, fits in memory (peak {peak}) but misses another constraint"
                f" of the search: {self.reason}")


@dataclass(frozen=True)
class Explanation:
    """A study explained (`explain_study`).

    `objective`/`metric`: the first objective and its Optuna metric name; `objectives`: each
    one's name, metric, axis title, scale, direction and best value; `rule`: how the exported
    trial was picked, `ladder_rank`: how each step's change was; `start`: the label of step 0;
    `best_trial`: the exported trial (None: no plan fits, or no trial finished); `steps`: the
    ladder from the user's plan to it; `sensitivity`: each knob of the best plan one step down
    and up; `phases`: the best plan's step by phase and the all-reduce terms with their
    sources; `closest`: when nothing fits, the trial nearest to fitting; `finished`: the trials
    that finished (complete or pruned; none: nothing was simulated, so no plan can fit).
    """

    study: str
    objective: str
    metric: str
    objectives: tuple[Row, ...]
    rule: str
    model: ModelFacts  # what the knobs' needs read of the model
    start: str
    ladder_rank: str
    best_trial: int | None = None
    steps: tuple[Row, ...] = ()
    sensitivity: tuple[Row, ...] = ()
    phases: tuple[Row, ...] = ()
    closest: Closest | None = None
    finished: int = 0

    def to_json(self) -> dict[str, Any]:
        """Plain containers for `json.dumps` (`ipu-tune explain --json`)."""
        return dataclasses.asdict(self)


# What each constraint other than memory is, as the headline names it when it is missed.
_CONSTRAINT_WORDS = {"global_batch": "the global batch", "throughput_floor": "the throughput floor"}


def _headline(missed: tuple[str, ...]) -> str:
    if not missed:
        return "no plan fits: every trial overflows the IPU's memory"
    words = [_CONSTRAINT_WORDS.get(m, "another constraint of the search") for m in missed]
    return ("no plan meets the search's constraints: the trials that fit in memory miss "
            + " or ".join(dict.fromkeys(words)))


def _missed_in_memory(study: optuna.Study) -> tuple[str, ...]:
    """The constraints the infeasible trials that fit in memory miss (empty: none fits)."""
    missed: dict[str, None] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        rec = TrialRecord.of(t)
        if rec.missed and "memory" not in rec.missed:
            missed.update(dict.fromkeys(rec.missed))
    return tuple(missed)


def no_plan_headline(study: optuna.Study) -> str:
    """Why a study has no plan to export, said of all its infeasible trials: every one
    overflows memory, or what those that fit in memory miss (the global batch, a throughput
    floor). The run summary, `explain`, the report and `studies` say the same."""
    return _headline(_missed_in_memory(study))


def closest_trial(study: optuna.Study) -> tuple[int, TrialRecord] | None:
    """The finished trial nearest to meeting every constraint: the smallest total violation,
    the sum of the constraints above 0. Each is a ratio (the memory excess over the limit, the
    global batch's and a throughput floor's relative miss: `SearchProblem.evaluate`), so they
    add up; a study of the memory constraint alone ranks by the memory excess.

    Infeasible trials are PRUNED (`ipu_tune.search.tell_outcome`)."""
    best: tuple[float, int, TrialRecord] | None = None
    for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
        rec = TrialRecord.of(t)
        if not rec.constraints or not rec.config or rec.result.get("step_time_s") is None:
            continue
        key = sum(max(c, 0.0) for c in rec.constraints)
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


def _objectives(problem: SearchProblem, values: list[float]) -> tuple[Row, ...]:
    rows = []
    for i, n in enumerate(problem.objective_names):
        o = OBJECTIVES[n]
        v = values[i] if i < len(values) else None
        rows.append({"name": n, "metric": o.metric, "axis": o.axis(), "scale": o.scale,
                     "direction": o.direction, "best_value": v,
                     "best_shown": o.show(v) if v is not None else None})
    return tuple(rows)


def _closest(study: optuna.Study, problem: SearchProblem, start: EvalConfig) -> Closest | None:
    found = closest_trial(study)
    if found is None:
        return None
    number, rec = found
    cfg = stored_config(problem, rec, number)
    outcome = problem.evaluate(cfg)
    r = outcome.result
    peak = max(r.memory_per_ipu, default=0)
    excess = int(max(0, peak - r.memory_limit_bytes))
    overflows = bool(r.memory) and not r.fits
    # The outcome's reason names every constraint the trial misses (memory, the global batch, a
    # throughput floor), the simulator's only memory; both are of this simulation, so the IPU
    # the reason names is the peak's (`ipu_tune.simulator.fullest`), whatever simulator stored
    # the trial. The remedies lower memory, so they are checked only when it overflows.
    return Closest(trial=number, reason=outcome.reason or rec.reason or r.reason,
                   peak_memory_bytes=int(peak), memory_limit_bytes=int(r.memory_limit_bytes),
                   excess_bytes=excess, overflows=overflows, missed=_missed_in_memory(study),
                   remedies=tuple(remedies(problem, cfg, start)) if overflows else ())


def explain_study(study: optuna.Study, problem: SearchProblem,
                  with_sensitivity: bool = True) -> Explanation:
    name = problem.objective_names[0]
    best = problem.best_trial(study)
    objectives = _objectives(problem, list(best.values or []) if best is not None else [])
    check_stored_trials(problem, study)  # a trial of another problem explains nothing of it
    start = problem.codec.user
    out = Explanation(
        study=study.study_name, objective=name, metric=OBJECTIVES[name].metric,
        objectives=objectives,
        rule=(PARETO_RULE if len(objectives) > 1 else f"the best {OBJECTIVES[name].title} "
              "among the trials that fit"),
        model=problem.codec.facts,
        start=start_label(start), ladder_rank=_ladder_rank(problem),
        finished=len(study.get_trials(deepcopy=False,
                                      states=(TrialState.COMPLETE, TrialState.PRUNED))))
    if best is None:
        return dataclasses.replace(out, closest=_closest(study, problem, start))
    best_cfg = stored_config(problem, TrialRecord.of(best), best.number)
    rule = compromise(study, problem.directions) if len(problem.directions) > 1 else None
    steps = ladder(problem, start, best_cfg, rank_by(problem, rule))
    first_fit = next((s.outcome.result.throughput for s in steps if s.outcome.result.fits), None)
    return dataclasses.replace(
        out, best_trial=best.number,
        steps=tuple(step_row(problem, s, first_fit, out.start) for s in steps),
        phases=tuple(phase_shares(problem.evaluate(best_cfg).result)),
        sensitivity=tuple(sensitivity(problem, best_cfg)) if with_sensitivity else ())


def invalid_start(data: Explanation) -> str:
    """When the starting plan is not a plan: why, and the first valid step used instead."""
    steps = data.steps
    if not steps or steps[0]["bottleneck"] != INVALID_PLAN:
        return ""
    valid = next((s for s in steps if s["bottleneck"] != INVALID_PLAN), None)
    used = ("; the ladder continues from step " + str(valid["step"]) + " (your plan with "
            + ", ".join(c for s in steps[1:valid["step"] + 1] for c in s["changes"]) + ")"
            if valid is not None else "")
    return f"your plan is invalid: {steps[0]['reason']}{used}"
