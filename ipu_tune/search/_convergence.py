"""How the best evolved over a study, and when it last improved (for the summary and report).

Single objective: the best feasible value after each finished trial, in trial-number order.
Several objectives: the hypervolume of the feasible Pareto front after each trial, for two
objectives (each oriented so that larger is better, reference point: the worst value of each
objective over the feasible trials, Zitzler & Thiele 1998), else the size of that front.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.search._objectives import OBJECTIVES, show_value
from ipu_tune.search._select import is_feasible, pareto_front

__all__ = ["Convergence", "convergence"]

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


@dataclass(frozen=True)
class Convergence:
    """Best-so-far history of a study."""

    measure: str  # the objective's name, "hypervolume" or "Pareto front size"
    history: tuple[tuple[int, float], ...]  # (trial number, best so far) per finished trial
    last_improved: int | None  # trial number at which the best last improved (None: no plan)
    finished: int  # finished trials looked at
    # Unit of a hypervolume: the product of the two objectives' stored units (its area is
    # measured from the worst feasible value of each).
    unit: str = ""

    @property
    def best(self) -> float | None:
        return self.history[-1][1] if self.history and self.last_improved is not None else None

    @property
    def trials_since_improvement(self) -> int:
        """Finished trials after the one that last improved the best."""
        if self.last_improved is None:
            return self.finished
        return sum(1 for n, _ in self.history if n > self.last_improved)


    def _show(self, value: float) -> str:
        """With the objective's unit (hypervolume and front size have none)."""
        if self.measure in OBJECTIVES:
            return show_value(self.measure, value)
        return f"{value:,.6g}" + (f" {self.unit}" if self.unit else "")

    def describe(self) -> str:
        """One line: the first and the final best, when it last improved, and since."""
        firsts = [(n, v) for n, v in self.history if not math.isnan(v)]
        if not firsts or self.best is None:
            return f"convergence: no feasible plan in {self.finished} finished trials"
        n0, v0 = firsts[0]
        return (f"convergence: best {self.measure} {self._show(v0)} at trial {n0}, "
                f"{self._show(self.best)} from trial {self.last_improved}; no better plan in the "
                f"{self.trials_since_improvement} finished trials after it")


def _hypervolume_2d(points: Sequence[tuple[float, float]], ref: tuple[float, float]) -> float:
    area, top = 0.0, ref[1]
    for x, y in sorted(points, reverse=True):
        if y > top and x > ref[0]:
            area += (x - ref[0]) * (y - top)
            top = y
    return area


def convergence(study: optuna.Study, directions: Sequence[str],
                objective_names: Sequence[str] = ()) -> Convergence:
    """The best-so-far history of `study` (finished trials, feasible ones count)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    # Infeasible trials are PRUNED (no value): finished, counted, never a best.
    trials = sorted(study.get_trials(deepcopy=False, states=_FINISHED),
                    key=lambda t: t.number)
    ok: list[FrozenTrial] = [t for t in trials if t.values is not None
                             and len(t.values) == len(signs)
                             and all(math.isfinite(v) for v in t.values) and is_feasible(t)]
    good = {t.number for t in ok}
    history: list[tuple[int, float]] = []
    last: int | None = None
    best: float | None = None
    if len(signs) == 1:
        measure = objective_names[0] if objective_names else "objective"
        for t in trials:
            if t.number in good:
                assert t.values is not None
                v = t.values[0]
                if best is None or signs[0] * v > signs[0] * best:
                    best, last = v, t.number
            history.append((t.number, best if best is not None else math.nan))
        return Convergence(measure, tuple(history), last, len(trials))
    two = len(signs) == 2
    measure = "hypervolume" if two else "Pareto front size"
    ref = tuple(min(s * t.values[k] for t in ok) for k, s in enumerate(signs)) if ok else ()
    seen: list[FrozenTrial] = []
    for t in trials:
        if t.number in good:
            seen.append(t)
            front = pareto_front(seen, signs)
            if two:
                pts = [(signs[0] * f.values[0], signs[1] * f.values[1]) for f in front
                       if f.values is not None]
                value = _hypervolume_2d(pts, (ref[0], ref[1]))
            else:
                value = float(len(front))
            if best is None or value > best:
                best, last = value, t.number
        history.append((t.number, best if best is not None else math.nan))
    unit = ""
    if two and all(n in OBJECTIVES for n in objective_names):
        # "throughput [samples/s]" -> samples/s: the units the values are stored in.
        unit = " x ".join(OBJECTIVES[n].metric.rsplit("[", 1)[-1].rstrip("]")
                          for n in objective_names)
        unit = f"({unit}, from the worst feasible point)"
    return Convergence(measure, tuple(history), last, len(trials), unit)
