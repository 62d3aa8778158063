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
        yaxis_title="MiB",
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
    elided = "" if shown == per_step else f" (first {shown} of {per_step} micro-batches)"
    span = "One step" if timeline.steps == 1 else f"One call ({timeline.steps} steps)"
    simulated = step_time_s * timeline.steps
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        title=(
            f"{span}, {timeline.schedule} schedule{elided}: trace {timeline.total_s * 1e3:.2f}"
            f" ms, simulated {simulated * 1e3:.2f} ms"
        ),
        xaxis_title="ms",
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


def trials_figure(results: pd.DataFrame) -> go.Figure:
    """Throughput against peak memory for every finished trial, coloured by fit."""
    fig = go.Figure()
    df = results.dropna(subset=["throughput", "peak_memory_bytes"])
    for fits, name, color in ((True, "fits", "#2ca02c"), (False, "does not fit", "#d62728")):
        part = df[df["fits"].astype(bool) == fits]
        if part.empty:
            continue
        fig.add_trace(
            go.Scatter(
                name=name,
                x=part["peak_memory_bytes"].astype(float) / _MIB,
                y=part["throughput"].astype(float),
                mode="markers",
                marker={"color": color, "size": 7, "opacity": 0.7},
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
    fig.update_layout(
        title="Trials: throughput against peak memory per IPU",
        xaxis_title="peak memory per IPU (MiB)",
        yaxis_title="samples/s",
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
