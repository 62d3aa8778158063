"""Plotly figures of the report: PopVision-like views of the best plan and of the study.

PopVision's Graph Analyser shows memory per IPU by category and an execution trace over time
(seed `popvision-analysis-tools.txt`); `memory_figure` and `timeline_figure` are those two
views of a simulated plan. The Optuna views (history, Pareto front, importances) are Optuna's
own `optuna.visualization` figures.
"""

from __future__ import annotations

import warnings
from collections.abc import Container, Sequence

import optuna
import pandas as pd
import plotly.graph_objects as go
from optuna.trial import TrialState

from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES, SimResult

from ._timeline import HOST_LANE, SEGMENT_KINDS, Timeline

__all__ = [
    "history_figure",
    "importances_figure",
    "light_study",
    "memory_figure",
    "objective_history_figure",
    "pareto_figure",
    "phases_figure",
    "timeline_figure",
    "trials_figure",
]

_MIB = float(1 << 20)
_KIB = float(1 << 10)

# Forward green and backward red as in the seed pipelining tutorial's execution report.
KIND_COLORS = {
    "forward": "#2ca02c",
    "backward": "#d62728",
    "recompute": "#ff7f0e",
    "exchange": "#f2c80f",  # on-chip exchange: its own colour, as PopVision's trace
    "inter_ipu": "#7f7f7f",
    "all_reduce_pod": "#17becf",
    "all_reduce_gw": "#aec7e8",
    "streaming_memory": "#8c564b",
    "weight_update": "#9467bd",
    "host_preprocess": "#bcbd22",
    "host_io": "#1f77b4",
    "host_overhead": "#e377c2",
}
_KIND_LABELS = {"forward": "F", "backward": "B", "recompute": "R"}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 70, "r": 30, "t": 60, "b": 50}}


def memory_figure(result: SimResult) -> go.Figure:
    """Stacked bytes by category on each IPU of one replica, against the SRAM limit."""
    x = [f"IPU{m.ipu} (stage {m.stage})" for m in result.memory]
    fig = go.Figure()
    for cat in MEMORY_CATEGORIES:
        values = [m.categories.get(cat, 0) / _MIB for m in result.memory]
        if not any(values):
            continue  # a category no IPU uses only clutters the legend
        fig.add_trace(
            go.Bar(
                name=cat,
                x=x,
                y=values,
                hovertemplate=f"{cat}: %{{y:.1f}} MiB<extra>%{{x}}</extra>",
            )
        )
    limit_mib = result.memory_limit_bytes / _MIB
    fig.add_hline(
        y=limit_mib,
        line={"color": "black", "dash": "dash", "width": 2},
        annotation_text=f"SRAM limit {limit_mib:.0f} MiB",
        annotation_position="top left",
    )
    for xi, m in zip(x, result.memory, strict=True):
        # The program fails when any tile overflows, not only the IPU total (seed guide ch. 5).
        fig.add_annotation(
            x=xi,
            y=m.total_bytes / _MIB,
            text=(
                f"{m.total_bytes / _MIB:.0f} MiB · max tile "
                f"{m.max_tile_bytes / _KIB:.0f}/{m.tile_limit_bytes / _KIB:.0f} KiB"
            ),
            showarrow=False,
            yshift=12,
        )
    status = "fits" if result.fits else f"does not fit: {result.reason}"
    fig.update_layout(
        barmode="stack",
        title=f"Memory by category per IPU ({status})",
        yaxis_title="memory per IPU (MiB)",
        legend_title="category",
        **_LAYOUT,
    )
    return fig


def phases_figure(result: SimResult) -> go.Figure:
    """Seconds per step by phase; the bottleneck phase is highlighted."""
    phases = [p for p in TIME_PHASES if result.phases.get(p, 0.0) > 0] or list(TIME_PHASES)
    ms = [result.phases.get(p, 0.0) * 1e3 for p in phases]
    colors = ["#d62728" if p == result.bottleneck else "#1f77b4" for p in phases]
    fig = go.Figure(
        go.Bar(
            x=ms,
            y=phases,
            orientation="h",
            marker_color=colors,
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=(
            f"Time by phase per step: {result.step_time_s * 1e3:.2f} ms, "
            f"bottleneck {result.bottleneck}"
        ),
        xaxis_title="ms per step",
        yaxis={"autorange": "reversed"},
        height=380,
        **_LAYOUT,
    )
    return fig


def timeline_figure(timeline: Timeline, step_time_s: float) -> go.Figure:
    """Execution-trace view: one horizontal lane per IPU plus the host, time in ms."""
    fig = go.Figure()
    for kind in SEGMENT_KINDS:
        segs = [s for s in timeline.segments if s.kind == kind]
        if not segs:
            continue
        label = _KIND_LABELS.get(kind, "")
        # One trace per kind (not per segment) keeps a long schedule light in the HTML.
        fig.add_trace(
            go.Bar(
                name=kind,
                orientation="h",
                y=[s.lane for s in segs],
                base=[s.start_s * 1e3 for s in segs],
                x=[s.duration_s * 1e3 for s in segs],
                marker_color=KIND_COLORS[kind],
                marker_line={"width": 0.5, "color": "white"},
                text=[f"{label}{s.micro_batch}" if label else "" for s in segs],
                textposition="inside",
                insidetextanchor="middle",
                customdata=[[s.micro_batch, s.start_s * 1e3] for s in segs],
                hovertemplate=(
                    f"{kind}<br>micro-batch %{{customdata[0]}}<br>start %{{customdata[1]:.3f}} ms"
                    "<br>%{x:.3f} ms<extra>%{y}</extra>"
                ),
            )
        )
    for (x0, x1), name in ((timeline.ramp_up_s, "ramp up"), (timeline.ramp_down_s, "ramp down")):
        if x1 > x0:
            fig.add_vrect(
                x0=x0 * 1e3,
                x1=x1 * 1e3,
                fillcolor="#888888",
                opacity=0.12,
                line_width=0,
                layer="below",
                annotation_text=name,
                annotation_position="top left",
            )
    shown = timeline.micro_batches_shown
    per_step = timeline.micro_batches_per_step
    elided = ("" if shown == per_step else
              f" (steady state compressed: {shown} of {per_step} micro-batches drawn, the other"
              f" {per_step - shown} repeat the same slot)")
    span = "One step" if timeline.steps == 1 else f"One call ({timeline.steps} steps)"
    simulated = step_time_s * timeline.steps
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        title=(
            f"{span}, {timeline.schedule} schedule{elided}: trace {timeline.total_s * 1e3:.2f}"
            f" ms, simulated {simulated * 1e3:.2f} ms"
        ),
        xaxis_title="time (ms)",
        yaxis={
            "categoryorder": "array",
            "categoryarray": list(timeline.lanes),
            "autorange": "reversed",
        },
        uniformtext={"minsize": 8, "mode": "hide"},
        height=max(260, 70 * len(timeline.lanes) + 140),
        legend_title="work",
        **_LAYOUT,
    )
    assert timeline.lanes[0] == HOST_LANE
    return fig


def trials_figure(results: pd.DataFrame, exported: int | None = None) -> go.Figure:
    """Throughput against peak memory for every finished trial; plans that do not fit are
    grey, drawn at 0 samples/s only as a strip under the axis, and clipped at the x-range's
    edge (the range fits the SRAM limit and the trials that fit)."""
    fig = go.Figure()
    # A plan that does not fit has no throughput (NULL in the store): 0 places it on the strip.
    df = results.dropna(subset=["peak_memory_bytes"]).fillna({"throughput": 0.0})
    fitting = df[df["fits"].astype(bool)]
    limit = (float(df["memory_limit_bytes"].dropna().iloc[0]) / _MIB
             if "memory_limit_bytes" in df and df["memory_limit_bytes"].notna().any() else None)
    x_hi = max([*(fitting["peak_memory_bytes"].astype(float) / _MIB), limit or 0.0]) * 1.15
    for fits, name, color in ((True, "fits", "#2ca02c"),
                              (False, "does not fit (clipped to the axis edge)", _GREY)):
        part = df[df["fits"].astype(bool) == fits]
        if part.empty:
            continue
        xs = part["peak_memory_bytes"].astype(float) / _MIB
        fig.add_trace(
            go.Scatter(
                name=name,
                x=xs if fits else xs.clip(upper=x_hi * 0.99),
                y=part["throughput"].astype(float),
                mode="markers",
                marker={"color": color, "size": 7, "opacity": 0.7,
                        "symbol": "circle" if fits else "triangle-right"},
                customdata=part[["trial_number", "bottleneck"]].astype(str).to_numpy(),
                hovertemplate=(
                    "trial %{customdata[0]}<br>%{y:.1f} samples/s<br>%{x:.0f} MiB"
                    "<br>bottleneck %{customdata[1]}<extra></extra>"
                ),
            )
        )
    if "memory_limit_bytes" in df and df["memory_limit_bytes"].notna().any():
        limit_mib = float(df["memory_limit_bytes"].dropna().iloc[0]) / _MIB
        fig.add_vline(
            x=limit_mib,
            line={"color": "black", "dash": "dash"},
            annotation_text=f"SRAM limit {limit_mib:.0f} MiB",
        )
    if exported is not None and (df["trial_number"] == exported).any():
        row = df[df["trial_number"] == exported].iloc[0]
        fig.add_trace(go.Scatter(x=[float(row["peak_memory_bytes"]) / _MIB],
                                 y=[float(row["throughput"])], mode="markers",
                                 name=f"exported: trial {exported}", marker=_STAR))
    fig.update_layout(
        title="Trials: throughput against peak memory per IPU",
        xaxis_title="peak memory per IPU (MiB)",
        yaxis_title="throughput (samples/s)",
        xaxis={"range": [0, x_hi] if x_hi > 0 else None},
        **_LAYOUT,
    )
    return fig


class _Snapshot(optuna.Study):
    """A read-only snapshot for plotting: reading `trials` does not deep-copy them.

    Optuna's plots read `study.trials` (a deep copy of every trial) once per parameter; at 500
    trials that alone took seconds. The plots only read trials, so the copies buy nothing.
    """

    def get_trials(
        self,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
    ) -> list[optuna.trial.FrozenTrial]:
        return super().get_trials(deepcopy=False, states=states)

    @property
    def trials(self) -> list[optuna.trial.FrozenTrial]:
        return self.get_trials(deepcopy=False)


def light_study(study: optuna.Study) -> optuna.Study:
    """An in-memory snapshot of `study`'s finished trials for Optuna's plots.

    Trial attributes are left out: the tuner's trials carry their whole config and simulation
    result, which plots never read.
    """
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(
        storage=storage, study_name=study.study_name, directions=list(study.directions)
    )
    light = _Snapshot(study_name=study.study_name, storage=storage)
    if study.metric_names is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            light.set_metric_names(list(study.metric_names))
    light.add_trials(
        optuna.trial.FrozenTrial(
            number=t.number,
            state=t.state,
            value=None,
            values=t.values,
            datetime_start=t.datetime_start,
            datetime_complete=t.datetime_complete,
            params=t.params,
            distributions=t.distributions,
            user_attrs={},
            system_attrs={},
            intermediate_values=t.intermediate_values,
            trial_id=t.number,  # ignored: `add_trials` gives each copy its own id
        )
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished()
    )
    return light


def _complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def history_figure(study: optuna.Study) -> go.Figure:
    """Optuna's optimisation history; the Pareto front for multi-objective studies."""
    if len(study.directions) == 1:
        return optuna.visualization.plot_optimization_history(study)
    if len(study.directions) <= 3:
        return optuna.visualization.plot_pareto_front(study)
    names: Sequence[str] = study.metric_names or [f"objective {i}" for i in range(4)]
    # Pareto plots stop at three objectives; fall back to the history of the first one.
    return optuna.visualization.plot_optimization_history(
        study, target=lambda t: t.values[0], target_name=names[0]
    )


def importances_figure(study: optuna.Study) -> go.Figure | str:
    """Optuna's parameter importances, or a note (str) saying why they are not shown."""
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
            if len(study.directions) == 1:
                return optuna.visualization.plot_param_importances(study, evaluator=evaluator)
            # Multi-objective: importance for reaching the Pareto front (PED-ANOVA's own rule);
            # Optuna's plot would rank each objective as if lower were better.
            scores = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:  # e.g. a single distinct value
        return f"Parameter importances could not be computed: {exc}"
    names = list(scores)[::-1]  # most important on top
    fig = go.Figure(
        go.Bar(
            x=[scores[n] for n in names],
            y=names,
            orientation="h",
            hovertemplate="%{y}: %{x:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Hyperparameter importances for reaching the Pareto front",
        xaxis_title="importance",
        height=max(300, 28 * len(names) + 120),
        **_LAYOUT,
    )
    return fig


# -- study views drawn here (not Optuna's): infeasible trials greyed and kept out of the axes --
_GREY = "#b0b0b0"
_STAR = {"symbol": "star", "size": 18, "color": "#ffbf00", "line": {"color": "black", "width": 1}}


def _padded(lo: float, hi: float) -> list[float]:
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return [lo - pad, hi + pad]


def objective_history_figure(points: pd.DataFrame, axis: str, direction: str,
                             exported: int | None) -> go.Figure:
    """Objective (shown unit) per trial; `points`: trial, value, feasible, reason.

    Trials that do not fit have no real value: they are grey ticks on the axis's lower edge,
    and the axis range is that of the trials that fit.
    """
    fig = go.Figure()
    ok = points[points["feasible"]]
    bad = points[~points["feasible"]]
    if not ok.empty:
        best = ok["value"].cummax() if direction == "maximize" else ok["value"].cummin()
        fig.add_trace(go.Scatter(x=ok["trial"], y=ok["value"], mode="markers", name="fits",
                                 marker={"color": "#1f77b4", "size": 7},
                                 hovertemplate="trial %{x}<br>%{y:,.4g}<extra></extra>"))
        fig.add_trace(go.Scatter(x=ok["trial"], y=best, mode="lines", name="best so far",
                                 line={"color": "#d62728", "shape": "hv"}))
        lo, hi = float(ok["value"].min()), float(ok["value"].max())
        yrange = _padded(lo, hi)
    else:
        yrange = [0.0, 1.0]
    if not bad.empty:
        fig.add_trace(go.Scatter(
            x=bad["trial"], y=[yrange[0]] * len(bad), mode="markers",
            name="does not fit (no value; drawn on the axis edge)",
            marker={"color": _GREY, "symbol": "line-ns-open", "size": 12},
            customdata=bad[["reason"]].to_numpy(),
            hovertemplate="trial %{x}: does not fit<br>%{customdata[0]}<extra></extra>"))
    if exported is not None and exported in set(ok["trial"]):
        row = ok[ok["trial"] == exported].iloc[0]
        fig.add_trace(go.Scatter(x=[exported], y=[row["value"]], mode="markers",
                                 name=f"exported: trial {exported}", marker=_STAR))
    fig.update_layout(title=f"Optimisation history: {axis}", xaxis_title="trial",
                      yaxis_title=axis, yaxis={"range": yrange}, legend_title="trials",
                      **_LAYOUT)
    return fig


def pareto_figure(points: pd.DataFrame, axes: Sequence[str], directions: Sequence[str],
                  exported: int | None) -> go.Figure:
    """Two objectives of the feasible trials (shown units), the Pareto front, the exported one.

    `points`: trial, x, y, feasible. Trials that do not fit are counted in the title only: they
    have no objective values worth a place on either axis.
    """
    ok = points[points["feasible"]]
    n_bad = int((~points["feasible"]).sum())
    sx = 1.0 if directions[0] == "maximize" else -1.0
    sy = 1.0 if directions[1] == "maximize" else -1.0
    front = [
        i for i, a in ok.iterrows()
        if not any((sx * b["x"] >= sx * a["x"] and sy * b["y"] >= sy * a["y"])
                   and (b["x"], b["y"]) != (a["x"], a["y"]) for _, b in ok.iterrows())
    ]
    fr = ok.loc[front].sort_values("x")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ok["x"], y=ok["y"], mode="markers", name="fits",
                             marker={"color": "#9ecae1", "size": 7}, text=ok["trial"],
                             hovertemplate="trial %{text}<br>%{x:,.4g}<br>%{y:,.4g}"
                                           "<extra></extra>"))
    fig.add_trace(go.Scatter(x=fr["x"], y=fr["y"], mode="lines+markers", name="Pareto front",
                             marker={"color": "#d62728", "size": 9},
                             line={"color": "#d62728", "dash": "dot"}, text=fr["trial"],
                             hovertemplate="trial %{text}<br>%{x:,.4g}<br>%{y:,.4g}"
                                           "<extra></extra>"))
    if exported is not None and exported in set(ok["trial"]):
        row = ok[ok["trial"] == exported].iloc[0]
        fig.add_trace(go.Scatter(x=[row["x"]], y=[row["y"]], mode="markers",
                                 name=f"exported: trial {exported}", marker=_STAR))
    xr = _padded(float(ok["x"].min()), float(ok["x"].max())) if not ok.empty else None
    yr = _padded(float(ok["y"].min()), float(ok["y"].max())) if not ok.empty else None
    fig.update_layout(
        title=f"Pareto front of the trials that fit ({n_bad} that do not fit not drawn)",
        xaxis_title=axes[0], yaxis_title=axes[1], xaxis={"range": xr}, yaxis={"range": yr},
        legend_title="trials", **_LAYOUT)
    return fig
