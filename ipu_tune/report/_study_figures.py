"""Plotly figures of the study: trials, history, Pareto front and the knobs' importances.

Plain Plotly figure specs, as in `_figures`; the importances come from Optuna's own
`optuna.importance`. Text from the study (knob names and values, metric names, a trial's
bottleneck and reason) goes in through `plotly_text`, as in `_figures`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import TrialState

from ipu_tune._escape import plotly_text

from ._figures import _MB, Figure, Row, _flag, _layout, _num, _template, _title, _vline

__all__ = [
    "history_figure",
    "importances_figure",
    "light_study",
    "objective_history_figure",
    "pareto_figure",
    "trials_figure",
]


# -- the study --------------------------------------------------------------------------------

# Infeasible trials greyed and kept out of the axes; the exported trial a star.
_GREY = "#b0b0b0"
_STAR = {"symbol": "star", "size": 18, "color": "#ffbf00", "line": {"color": "black", "width": 1}}


def _star(exported: int, x: float, y: float) -> dict[str, Any]:
    return {"type": "scatter", "x": [x], "y": [y], "mode": "markers",
            "name": f"exported: trial {exported}", "marker": dict(_STAR)}


_NO_FIT_ROW = "does not fit"  # the strip under the chart where plans without a throughput go


def _fit_trace(part: Sequence[Row]) -> dict[str, Any]:
    return {
        "type": "scatter", "name": "fits", "mode": "markers",
        "x": [float(r["peak_memory_bytes"]) / _MB for r in part],
        "y": [float(r["throughput"]) for r in part],
        "marker": {"color": "#2ca02c", "size": 7, "opacity": 0.7},
        "customdata": [[plotly_text(r.get("trial_number")), plotly_text(r.get("bottleneck"))]
                       for r in part],
        "hovertemplate": ("trial %{customdata[0]}<br>%{y:,.6~g} samples/s<br>%{x:,.1f} MB"
                          "<br>bottleneck %{customdata[1]}<extra></extra>"),
    }


def _no_fit_trace(part: Sequence[Row], x_hi: float, clipped: bool) -> dict[str, Any]:
    """Plans that do not fit have no throughput: a strip of their own (`yaxis2`), never a
    point at 0 samples/s; the hover gives the real peak, also when drawn at the axis edge."""
    return {
        "type": "scatter", "mode": "markers", "yaxis": "y2",
        "name": _NO_FIT_ROW + (" (no throughput; clipped to the axis edge)" if clipped
                               else " (no throughput)"),
        "x": [min(float(r["peak_memory_bytes"]) / _MB, x_hi * 0.99) for r in part],
        "y": [_NO_FIT_ROW] * len(part),
        "marker": {"color": _GREY, "size": 7, "opacity": 0.7, "symbol": "triangle-right"},
        "customdata": [[plotly_text(r.get("trial_number")),
                        f"{float(r['peak_memory_bytes']) / _MB:,.1f}",
                        plotly_text(r.get("reason") or "does not fit")] for r in part],
        "hovertemplate": ("trial %{customdata[0]}: does not fit, no throughput<br>"
                          "peak %{customdata[1]} MB per IPU<br>%{customdata[2]}<extra></extra>"),
    }


def trials_figure(results: Sequence[Row], exported: int | None = None) -> Figure:
    """Throughput against peak memory for every finished trial (rows of the results table).
    Plans that do not fit have no throughput: they are grey, on a strip of their own under the
    chart, clipped at the x-range's edge (the range fits the SRAM limit and the trials that fit;
    when none fits, every trial, so a no-fit study shows how far over the limit each plan is)."""
    rows = [r for r in results if _num(r.get("peak_memory_bytes")) is not None]
    limits = [v for r in rows if (v := _num(r.get("memory_limit_bytes"))) is not None]
    limit_mb = limits[0] / _MB if limits else None
    fitting = [r for r in rows if _flag(r.get("fits")) and _num(r.get("throughput")) is not None]
    others = [r for r in rows if r not in fitting]
    shown = fitting or rows
    x_hi = max([*(float(r["peak_memory_bytes"]) / _MB for r in shown), limit_mb or 0.0]) * 1.15
    data = [_fit_trace(fitting)] if fitting else []
    if others:
        data.append(_no_fit_trace(others, x_hi, bool(fitting)))
    y_hi = max((float(r["throughput"]) for r in fitting), default=1.0) * 1.1
    layout = _layout("Trials: throughput against peak memory per IPU",
                     xaxis={**_title("peak memory per IPU (MB)"),
                            **({"range": [0, x_hi]} if x_hi > 0 else {})},
                     yaxis={**_title("throughput (samples/s)"), "range": [0, y_hi],
                            "domain": [0.14, 1.0] if others else [0.0, 1.0]})
    if others:  # the strip under the chart, the memory axis under the strip
        layout["yaxis2"] = {"domain": [0.0, 0.08], "type": "category", "fixedrange": True,
                            "anchor": "x"}
        layout["xaxis"]["anchor"] = "y2"
    if limit_mb is not None:
        shape, note = _vline(limit_mb, f"SRAM limit {limit_mb:.0f} MB",
                             {"color": "black", "dash": "dash"})
        shape["yref"] = "paper"  # across the no-fit strip too
        layout.update(shapes=[shape], annotations=[note])
    mine = [r for r in fitting if exported is not None and r.get("trial_number") == exported]
    if mine:
        assert exported is not None
        data.append(_star(exported, float(mine[0]["peak_memory_bytes"]) / _MB,
                          float(mine[0]["throughput"])))
    return {"data": data, "layout": layout}


class _Snapshot(optuna.Study):
    """A read-only snapshot for plotting: `get_trials` and `trials` serve a list built once.

    Optuna's plots and importances read `study.trials` (a deep copy of every trial) once per
    parameter; at 500 trials that alone took seconds. Adding the trials to an in-memory
    storage costs a deep copy and a validation each (0.4-0.6 s at 1,000 trials). They only read
    trials (`get_trials`, `trials`, `directions`, `metric_names`), so the snapshot keeps its
    own list and its storage holds only the study's directions and metric names.
    """

    def __init__(self, study_name: str, storage: optuna.storages.BaseStorage,
                 trials: list[optuna.trial.FrozenTrial]) -> None:
        super().__init__(study_name=study_name, storage=storage)
        self._snapshot = trials

    def get_trials(
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
    ) -> list[optuna.trial.FrozenTrial]:
        if states is None:
            return list(self._snapshot)
        return [t for t in self._snapshot if t.state in states]

    @property
    def trials(self) -> list[optuna.trial.FrozenTrial]:
        return self.get_trials(deepcopy=False)


def _kept(value: Any) -> Any:
    return value


def _drawn(value: Any) -> Any:
    """A text as Plotly draws it literally (`plotly_text`); a number, bool or None as it is."""
    return plotly_text(value) if isinstance(value, str) else value


def _choices(d: BaseDistribution, text: Callable[[Any], Any]) -> BaseDistribution:
    if isinstance(d, CategoricalDistribution):
        return CategoricalDistribution([text(c) for c in d.choices])
    return d


def light_study(study: optuna.Study, text: Callable[[Any], Any] = _kept) -> optuna.Study:
    """A snapshot of `study`'s finished trials for Optuna's plots and importances.

    Trial attributes are left out: the tuner's trials carry their whole config and simulation
    result, which plots never read. `text` is applied to every knob name, text value and metric
    name (`_drawn`: for a figure Optuna draws, text as Plotly shows it literally).
    """
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(
        storage=storage, study_name=study.study_name, directions=list(study.directions)
    )
    trials = [
        optuna.trial.FrozenTrial(
            number=t.number,
            state=t.state,
            value=None,
            values=t.values,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
            params={text(k): text(v) for k, v in t.params.items()},
            distributions={text(k): _choices(d, text) for k, d in t.distributions.items()},
            user_attrs={},
            system_attrs={},
            intermediate_values=t.intermediate_values,
            trial_id=t.number,  # unique within the study: PED-ANOVA tells trials apart by id
        )
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished()
    ]
    light = _Snapshot(study.study_name, storage, trials)
    if study.metric_names is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            light.set_metric_names([text(n) for n in study.metric_names])
    return light


def _complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def history_figure(study: optuna.Study) -> Figure:
    """Optuna's own view of a study the report's views do not fit (more than two objectives):
    the optimisation history of the first objective. The one path that imports plotly.

    Optuna writes the study's text into the figure (metric names in titles, each trial's
    parameters as JSON in its hover text, lines joined by `<br>`): it is given the study with
    that text escaped (`plotly_text`), as the report's own figures escape theirs."""
    import plotly.io

    study = light_study(study, _drawn)
    names: Sequence[str] = study.metric_names or [f"objective {i}"
                                                  for i in range(len(study.directions))]
    if len(study.directions) == 1:
        fig = optuna.visualization.plot_optimization_history(study)
    elif len(study.directions) <= 3:
        fig = optuna.visualization.plot_pareto_front(study)
    else:  # Pareto plots stop at three objectives; the history of the first one
        fig = optuna.visualization.plot_optimization_history(
            study, target=lambda t: t.values[0], target_name=names[0])
    spec: Figure = json.loads(plotly.io.to_json(fig))
    return spec


def importances_figure(study: optuna.Study) -> Figure | str:
    """Optuna's PED-ANOVA parameter importances as Optuna draws them (one objective), or for
    reaching the Pareto front (several); a note (str) saying why they are not shown."""
    trials = _complete(study)
    if len(trials) < 2:
        return (
            f"Parameter importances need at least 2 completed trials; this study has {len(trials)}."
        )
    # PED-ANOVA: Optuna's default evaluator, needs no scikit-learn and is fast on 500 trials.
    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    try:
        with warnings.catch_warnings():
            # PED-ANOVA warns for knobs with few trials per value; the ranking still stands.
            warnings.simplefilter("ignore", UserWarning)
            # Multi-objective: importance for reaching the Pareto front (PED-ANOVA's own rule);
            # Optuna's plot would rank each objective as if lower were better.
            scores = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:  # e.g. a single distinct value
        return f"Parameter importances could not be computed: {exc}"
    names = list(scores)[::-1]  # most important on top
    values = [scores[n] for n in names]
    if len(study.directions) == 1:
        return _optuna_importances(study, names, values)
    bar = {"type": "bar", "x": values, "y": [plotly_text(n) for n in names], "orientation": "h",
           "hovertemplate": "%{y}: %{x:.3f}<extra></extra>"}
    return {"data": [bar], "layout": _layout(
        "Hyperparameter importances for reaching the Pareto front",
        xaxis=_title("importance"), height=max(300, 28 * len(names) + 120))}


def _optuna_importances(study: optuna.Study, names: list[str], values: list[float]) -> Figure:
    """The figure of `optuna.visualization.plot_param_importances`, as that function draws it
    (labels, hover text, Plotly's default template), without importing plotly."""
    kinds: dict[str, str] = {}
    for t in _complete(study):
        for n, d in t.distributions.items():
            kinds.setdefault(n, type(d).__name__)
    shown = [plotly_text(n) for n in names]
    bar = {
        "type": "bar", "x": values, "y": shown, "orientation": "h",
        "name": plotly_text(study.metric_names[0]) if study.metric_names else "Objective Value",
        "text": [f"{v:.2f}" if v >= 0.01 else "<0.01" for v in values],
        "textposition": "outside", "cliponaxis": False,
        # Each name is text of the template itself: escaped, it holds no `%{` field nor tag.
        "hovertemplate": [
            f"{label} ({plotly_text(kinds.get(n, 'BaseDistribution'))}): {v}<extra></extra>"
            for n, label, v in zip(names, shown, values, strict=True)],
    }
    return {"data": [bar], "layout": {
        "template": _template("plotly"), "title": {"text": "Hyperparameter Importances"},
        "xaxis": _title("Hyperparameter Importance"), "yaxis": _title("Hyperparameter")}}


def _padded(lo: float, hi: float) -> list[float]:
    """[lo, hi] with a margin; a figure that is never negative (samples/s, MB, changes) keeps
    its axis at or above 0."""
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return [lo - pad if lo < 0 else max(0.0, lo - pad), hi + pad]


def closeness_figure(results: Sequence[Row]) -> Figure:
    """When no plan fits: each trial's peak memory per IPU (MB) and the lowest so far, against
    the SRAM limit (the history of how close the search came to fitting)."""
    rows = sorted((r for r in results if _num(r.get("peak_memory_bytes")) is not None),
                  key=lambda r: int(r["trial_number"]))
    trials = [int(r["trial_number"]) for r in rows]
    peaks = [float(r["peak_memory_bytes"]) / _MB for r in rows]
    lowest = [min(peaks[: i + 1]) for i in range(len(peaks))]
    data: list[dict[str, Any]] = [
        {"type": "scatter", "x": trials, "y": peaks, "mode": "markers", "name": "peak memory",
         "marker": {"color": _GREY, "size": 7},
         "hovertemplate": "trial %{x}<br>%{y:,.0f} MB<extra></extra>"},
        {"type": "scatter", "x": trials, "y": lowest, "mode": "lines",
         "name": "closest so far", "line": {"color": "#d62728", "shape": "hv"}}]
    limits = [float(r["memory_limit_bytes"]) / _MB for r in rows
              if _num(r.get("memory_limit_bytes")) is not None]
    shapes = []
    if limits:
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                       "y0": limits[0], "y1": limits[0],
                       "line": {"color": "black", "dash": "dash", "width": 2}})
    return {"data": data, "layout": _layout(
        "No plan fits: peak memory per IPU by trial (closest so far in red, limit dashed)",
        xaxis=_title("trial"), yaxis=_title("peak memory per IPU (MB)"), shapes=shapes,
        legend=_title("trials"))}


def objective_history_figure(points: Sequence[Row], axis: str, direction: str,
                             exported: int | None) -> Figure:
    """Objective (shown unit) per trial; `points`: trial, value, feasible, reason.

    Trials that do not fit have no real value: they are grey ticks on the axis's lower edge,
    and the axis range is that of the trials that fit.
    """
    ok = [p for p in points if p["feasible"]]
    bad = [p for p in points if not p["feasible"]]
    data: list[dict[str, Any]] = []
    if ok:
        values = [float(p["value"]) for p in ok]
        pick = max if direction == "maximize" else min
        best, so_far = [], values[0]
        for v in values:
            so_far = pick(so_far, v)
            best.append(so_far)
        trials = [p["trial"] for p in ok]
        data.append({"type": "scatter", "x": trials, "y": values, "mode": "markers",
                     "name": "fits", "marker": {"color": "#1f77b4", "size": 7},
                     "hovertemplate": "trial %{x}<br>%{y:,.4g}<extra></extra>"})
        data.append({"type": "scatter", "x": trials, "y": best, "mode": "lines",
                     "name": "best so far", "line": {"color": "#d62728", "shape": "hv"}})
        yrange = _padded(min(values), max(values))
    else:
        yrange = [0.0, 1.0]
    if bad:
        data.append({
            "type": "scatter", "x": [p["trial"] for p in bad], "y": [yrange[0]] * len(bad),
            "mode": "markers", "name": "does not fit (no value; drawn on the axis edge)",
            "marker": {"color": _GREY, "symbol": "line-ns-open", "size": 12},
            "customdata": [[plotly_text(p["reason"])] for p in bad],
            "hovertemplate": "trial %{x}: does not fit<br>%{customdata[0]}<extra></extra>"})
    mine = [p for p in ok if p["trial"] == exported]
    if exported is not None and mine:
        data.append(_star(exported, exported, float(mine[0]["value"])))
    axis = plotly_text(axis)
    return {"data": data, "layout": _layout(
        f"Optimisation history: {axis}", xaxis=_title("trial"),
        yaxis={**_title(axis), "range": yrange}, legend=_title("trials"))}


def pareto_figure(points: Sequence[Row], axes: Sequence[str], directions: Sequence[str],
                  exported: int | None) -> Figure:
    """Two objectives of the feasible trials (shown units), the Pareto front, the exported one.

    `points`: trial, x, y, feasible. Trials that do not fit are counted in the title only: they
    have no objective values worth a place on either axis.
    """
    ok = [p for p in points if p["feasible"]]
    n_bad = len(points) - len(ok)
    sx = 1.0 if directions[0] == "maximize" else -1.0
    sy = 1.0 if directions[1] == "maximize" else -1.0
    front = sorted(
        (a for a in ok
         if not any((sx * b["x"] >= sx * a["x"] and sy * b["y"] >= sy * a["y"])
                    and (b["x"], b["y"]) != (a["x"], a["y"]) for b in ok)),
        key=lambda p: p["x"])
    hover = "trial %{text}<br>%{x:,.4g}<br>%{y:,.4g}<extra></extra>"
    data: list[dict[str, Any]] = [
        {"type": "scatter", "x": [p["x"] for p in ok], "y": [p["y"] for p in ok],
         "mode": "markers", "name": "fits", "marker": {"color": "#9ecae1", "size": 7},
         "text": [p["trial"] for p in ok], "hovertemplate": hover},
        {"type": "scatter", "x": [p["x"] for p in front], "y": [p["y"] for p in front],
         "mode": "lines+markers", "name": "Pareto front",
         "marker": {"color": "#d62728", "size": 9}, "line": {"color": "#d62728", "dash": "dot"},
         "text": [p["trial"] for p in front], "hovertemplate": hover},
    ]
    mine = [p for p in ok if p["trial"] == exported]
    if exported is not None and mine:
        data.append(_star(exported, mine[0]["x"], mine[0]["y"]))
    xaxis, yaxis = _title(plotly_text(axes[0])), _title(plotly_text(axes[1]))
    if ok:
        xaxis["range"] = _padded(min(p["x"] for p in ok), max(p["x"] for p in ok))
        yaxis["range"] = _padded(min(p["y"] for p in ok), max(p["y"] for p in ok))
    return {"data": data, "layout": _layout(
        f"Pareto front of the trials that fit ({n_bad} that do not fit not drawn)",
        xaxis=xaxis, yaxis=yaxis, legend=_title("trials"))}
