"""report.html: built from real simulations and a real Optuna study, opened in headless Chromium."""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from plotly.offline import get_plotlyjs

import ipu_tune
from ipu_tune.config import EvalConfig, load_config, to_plain_dict
from ipu_tune.plan import plan_from_config
from ipu_tune.records import TrialRecord, result_payload
from ipu_tune.report import HOST_LANE, Segment, build_timeline, render_report, write_report
from ipu_tune.results import row_from_trial
from ipu_tune.simulator import SimResult

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
MODEL = {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10}
NUM_IPUS = 4
# The seed hands-on ladder's plan (16.16, GA 8, DI 4, 8-bit I/O, async loader), on 2 of 4 IPUs.
SEED_PLAN = {
    "stages": 2,
    "micro_batch_size": 16,
    "precision": "16.16",
    "gradient_accumulation": 8,
    "device_iterations": 4,
    "schedule": "grouped",
    "recompute": "none",
    "available_memory_proportion": 0.6,
    "offload_optimizer_state": False,
    "replicated_tensor_sharding": False,
    "prefetch_depth": 3,
    "io_tiles": 0,
    "eight_bit_io": True,
    "async_dataloader": True,
    "dataloader_workers": 4,
}

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _blocks() -> list[str]:
    return ipu_tune.profile(MODEL).blocks


def _splits(stages: int) -> list[str]:
    blocks = _blocks()
    return [blocks[round(i * len(blocks) / stages)] for i in range(1, stages)]


def _config(trial: optuna.Trial) -> dict[str, Any]:
    """A varied, valid plan of resnet101 on 4 Mk2 IPUs, chosen by the trial."""
    stages = trial.suggest_categorical("stages", [1, 2, 4])
    replicas = NUM_IPUS // stages
    rts = trial.suggest_categorical("replicated_tensor_sharding", [False, True]) and replicas > 1
    return {
        "model": MODEL,
        "workload": {
            "micro_batch_size": trial.suggest_categorical("micro_batch_size", [8, 16, 64])
        },
        "system": {"ipu": "mk2", "num_ipus": NUM_IPUS},
        "plan": {
            "precision": trial.suggest_categorical("precision", ["32.32", "16.32", "16.16"]),
            # At least the stages: PopTorch compiles no pipelined training program below it.
            "gradient_accumulation": max(stages, trial.suggest_categorical(
                "gradient_accumulation", [1, 8, 32])),
            "device_iterations": trial.suggest_categorical("device_iterations", [1, 4, 16]),
            "replication_factor": replicas,
            "pipeline": {
                "splits": _splits(stages),
                "schedule": trial.suggest_categorical(
                    "schedule", ["grouped", "interleaved", "sharded"]
                ),
            },
            "recompute": trial.suggest_categorical("recompute", ["none", "checkpoints"]),
            "available_memory_proportion": trial.suggest_float(
                "available_memory_proportion", 0.1, 1.0
            ),
            "offload_optimizer_state": trial.suggest_categorical(
                "offload_optimizer_state", [False, True]
            ),
            "replicated_tensor_sharding": rts,
            "prefetch_depth": trial.suggest_int("prefetch_depth", 1, 3),
            "io_tiles": trial.suggest_categorical("io_tiles", [0, 32, 64]),
            "eight_bit_io": trial.suggest_categorical("eight_bit_io", [False, True]),
            "async_dataloader": trial.suggest_categorical("async_dataloader", [False, True]),
            "dataloader_workers": trial.suggest_categorical("dataloader_workers", [1, 4, 8]),
        },
    }


def run_study(
    n_trials: int, *, directions: tuple[str, ...] = ("maximize",), seed: int = 0
) -> tuple[optuna.Study, pd.DataFrame, EvalConfig | None, SimResult | None]:
    """A real in-memory study whose trials are real simulations, and its results table."""
    study = optuna.create_study(
        directions=list(directions), sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    study.enqueue_trial(SEED_PLAN)
    best: tuple[float, EvalConfig, SimResult] | None = None

    def objective(trial: optuna.Trial) -> float | tuple[float, float]:
        nonlocal best
        cfg = load_config(_config(trial))
        result = ipu_tune.evaluate(cfg)
        TrialRecord.write_plan(trial, to_plain_dict(cfg), result_payload(result))
        if result.fits and (best is None or result.throughput > best[0]):
            best = (result.throughput, cfg, result)
        if len(directions) == 1:
            return result.throughput
        return result.throughput, float(max(result.memory_per_ipu))

    study.optimize(objective, n_trials=n_trials)
    rows = [row_from_trial(study.study_name, t) for t in study.trials]
    frame = pd.DataFrame(rows)
    if best is None:
        return study, frame, None, None
    return study, frame, best[1], best[2]


@pytest.fixture(scope="module")
def single() -> tuple[optuna.Study, pd.DataFrame, EvalConfig | None, SimResult | None]:
    return run_study(14)


def figures(text: str) -> dict[str, str]:
    """HTML inside each `<div class="figure" data-figure=NAME>`, by NAME."""
    marks = list(re.finditer(r'<div class="figure" data-figure="(\w+)">', text))
    out = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[m.group(1)] = text[m.end() : end]
    return out


def test_report_is_offline_and_has_every_view(single: Any, tmp_path: Path) -> None:
    study, frame, cfg, result = single
    assert cfg is not None and result is not None, "the seed tutorial's plan should fit"
    path = write_report(
        tmp_path / "out" / "report.html",
        study=study,
        results=frame,
        best_config=cfg,
        best_result=result,
        title="ipu-tune: test",
    )
    text = path.read_text()
    assert set(figures(text)) == {
        "memory",
        "phases",
        "timeline",
        "history",
        "importances",
        "trials",
    }
    # plotly.js is inlined exactly once and nothing is fetched from the network.
    assert text.count(get_plotlyjs()[:200]) == 1
    assert "<script src=" not in text and "<link " not in text
    assert 'data-note="no-feasible-plan"' not in text
    # The top-trials table lists the completed trials, fitting ones first, best first.
    rows = re.findall(r"<tr><td data-v=\"\d+\">.*?</tr>", text)
    assert len(rows) == min(50, len(frame))
    fits = [r for r in frame.itertuples() if r.fits]
    best_row = max(fits, key=lambda r: r.throughput)
    assert re.findall(r'data-v="([^"]*)"', rows[0])[1] == str(best_row.trial_number)
    assert not list(path.parent.glob(".*tmp")), "no temporary file is left behind"


def plotly_specs(text: str) -> dict[str, tuple[Any, Any]]:
    """(data, layout) of each `Plotly.newPlot("plot-NAME", data, layout, config)` call."""
    decoder = json.JSONDecoder()
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\("plot-(\w+)", ', text):
        data, end = decoder.raw_decode(text, m.end())
        layout, _ = decoder.raw_decode(text, end + len(", "))
        out[m.group(1)] = (data, layout)
    return out


@pytest.mark.parametrize("directions", [("maximize",), ("maximize", "minimize")])
def test_every_figure_is_a_valid_plotly_figure(directions: tuple[str, ...]) -> None:
    """The report writes its figures as plain Plotly specs (no plotly import when it runs):
    plotly's own validation accepts each one, property by property."""
    import plotly.graph_objects as go

    study, frame, cfg, result = run_study(8, directions=directions, seed=2)
    text = render_report(study=study, results=frame.to_dict("records"), best_config=cfg,
                         best_result=result, title="specs")
    specs = plotly_specs(text)
    assert specs and set(specs) == set(figures(text))
    for name, (data, layout) in specs.items():
        fig = go.Figure(data=data, layout=layout)  # raises on any unknown property or value
        assert fig.data, name
        assert layout["template"]["layout"], f"{name}: the template went missing"


def test_multi_objective_study_shows_the_pareto_front(tmp_path: Path) -> None:
    study, frame, cfg, result = run_study(6, directions=("maximize", "minimize"), seed=1)
    text = render_report(
        study=study, results=frame, best_config=cfg, best_result=result, title="pareto"
    )
    names = set(figures(text))
    assert "pareto" in names and "history" not in names


def test_no_feasible_plan_is_reported_without_crashing(single: Any) -> None:
    study, frame, _, _ = single
    text = render_report(
        study=study, results=frame, best_config=None, best_result=None, title="none fits"
    )
    assert 'data-note="no-feasible-plan"' in text
    assert not {"memory", "timeline", "phases"} & set(figures(text))


def test_a_plan_that_does_not_fit_shows_why(single: Any) -> None:
    study, frame, _, _ = single
    cfg = load_config(
        {
            "model": MODEL,
            "workload": {"micro_batch_size": 4096},
            "system": {"num_ipus": 1},
            "plan": {"precision": "32.32"},
        }
    )
    result = ipu_tune.evaluate(cfg)
    assert not result.fits
    text = render_report(
        study=study, results=frame, best_config=cfg, best_result=result, title="too big"
    )
    assert 'data-note="no-feasible-plan"' in text
    assert html.escape(result.reason) in text
    assert "memory" in figures(text)  # the overflow against the SRAM limit is the point


def test_a_study_without_completed_trials_still_reports() -> None:
    study = optuna.create_study(direction="maximize")

    def invalid(trial: optuna.Trial) -> float:
        split = trial.suggest_categorical("split", ["no.such.block", "conv1"])
        bad = {"model": MODEL, "system": {"num_ipus": 2}, "plan": {"pipeline": {"splits": [split]}}}
        return ipu_tune.evaluate(bad).throughput  # raises: not a block / the first block

    study.optimize(invalid, n_trials=3, catch=(ipu_tune.IpuTuneError,))
    frame = pd.DataFrame([row_from_trial(study.study_name, t) for t in study.trials])
    assert set(frame["state"]) == {"FAIL"}
    text = render_report(study=study, results=frame, best_config=None, best_result=None, title="x")
    assert not figures(text)
    assert 'data-note="no-feasible-plan"' in text and 'data-note="history"' in text


def test_importances_need_two_completed_trials(tmp_path: Path) -> None:
    study, frame, cfg, result = run_study(1)
    text = render_report(study=study, results=frame, best_config=cfg, best_result=result, title="1")
    assert 'data-note="importances"' in text
    assert "importances" not in figures(text)


def test_write_is_atomic(single: Any, tmp_path: Path) -> None:
    study, frame, cfg, result = single
    target = tmp_path / "report.html"
    target.write_text("old report")
    write_report(target, study=study, results=frame, best_config=cfg, best_result=result, title="t")
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    # A target that is a directory is refused before anything is written, and kept.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "keep").write_text("x")
    with pytest.raises(ipu_tune.IpuTuneError, match="exists and is a directory"):
        write_report(
            blocked, study=study, results=frame, best_config=cfg, best_result=result, title="t"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked", "report.html"]


# --- the execution trace -----------------------------------------------------------------


def _simulate(stages: int, **plan: Any) -> tuple[SimResult, Any]:
    mode = plan.pop("mode", "train")
    ga = plan.pop("gradient_accumulation", 1 if mode == "infer" else 8)
    cfg = load_config(
        {
            "model": MODEL,
            "workload": {"mode": mode, "micro_batch_size": 8},
            "system": {"num_ipus": stages},
            "plan": {
                "precision": "16.16",
                "gradient_accumulation": ga,
                "pipeline": {
                    "splits": _splits(stages),
                    "schedule": plan.pop("schedule", "grouped"),
                },
                **plan,
            },
        }
    )
    return ipu_tune.evaluate(cfg), plan_from_config(cfg)


def _by_lane(segments: tuple[Segment, ...]) -> dict[str, list[Segment]]:
    lanes: dict[str, list[Segment]] = {}
    for s in segments:
        lanes.setdefault(s.lane, []).append(s)
    return lanes


def _find(segments: tuple[Segment, ...], lane: str, kind: str, mb: int) -> Segment:
    (seg,) = [s for s in segments if s.lane == lane and s.kind == kind and s.micro_batch == mb]
    return seg


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sharded"])
def test_timeline_respects_dependencies(schedule: str) -> None:
    result, plan = _simulate(4, schedule=schedule, recompute="checkpoints")
    tl = build_timeline(result, plan)
    assert tl.lanes == (HOST_LANE, "IPU0", "IPU1", "IPU2", "IPU3")
    for lane, segs in _by_lane(tl.segments).items():
        ordered = sorted(segs, key=lambda s: s.start_s)
        for a, b in itertools.pairwise(ordered):
            assert a.end_s <= b.start_s + 1e-12, f"{lane}: {a} overlaps {b}"
    segs = tl.segments
    for mb in range(plan.gradient_accumulation):
        for s in range(3):  # forward flows down the stages, backward back up
            fwd_next = _find(segs, f"IPU{s + 1}", "forward", mb)
            assert _find(segs, f"IPU{s}", "forward", mb).end_s <= fwd_next.start_s + 1e-12
            # This stage's backward work (recompute first, when there is any) starts after
            # the next stage's backward has finished.
            back = [
                x
                for x in segs
                if x.lane == f"IPU{s}"
                and x.micro_batch == mb
                and x.kind in ("recompute", "backward")
            ]
            start = min(x.start_s for x in back)
            assert _find(segs, f"IPU{s + 1}", "backward", mb).end_s <= start + 1e-12
    if schedule == "sharded":
        # One stage at a time: no two IPU segments overlap in time, and there is no ramp.
        # (The weight update after the last micro-batch runs on every IPU at once.)
        device = sorted(
            (s for s in segs if s.lane != HOST_LANE and s.micro_batch >= 0),
            key=lambda s: s.start_s,
        )
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in itertools.pairwise(device))
        assert tl.ramp_up_s[0] == tl.ramp_up_s[1]
    else:
        assert tl.ramp_up_s[1] > tl.ramp_up_s[0] and tl.ramp_down_s[1] > tl.ramp_down_s[0]


@pytest.mark.parametrize("stages", [1, 2, 4])
@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sharded"])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_trace_adds_up_to_the_simulated_time(stages: int, schedule: str, mode: str) -> None:
    result, plan = _simulate(
        stages, schedule=schedule, mode=mode, device_iterations=4, recompute="checkpoints"
    )
    tl = build_timeline(result, plan)
    # Train: one weight update; infer: one call of device_iterations micro-batches.
    assert tl.steps == (1 if mode == "train" else 4)
    assert tl.total_s == pytest.approx(result.step_time_s * tl.steps, rel=1e-9)


def test_interleaved_trace_is_not_shorter_than_grouped() -> None:
    result, plan = _simulate(4, schedule="grouped")
    grouped = build_timeline(result, plan)
    interleaved = build_timeline(result, plan_from_config(_with_schedule(plan, "interleaved")))
    assert interleaved.total_s >= grouped.total_s


def _with_schedule(plan: Any, schedule: str) -> EvalConfig:
    return load_config(
        {
            "model": MODEL,
            "workload": {"micro_batch_size": plan.micro_batch_size},
            "system": {"num_ipus": plan.stages},
            "plan": {
                "precision": plan.precision,
                "gradient_accumulation": plan.gradient_accumulation,
                "pipeline": {"splits": list(plan.splits), "schedule": schedule},
            },
        }
    )


def test_inference_trace_has_forwards_only_and_long_steps_are_capped() -> None:
    result, plan = _simulate(2, mode="infer", device_iterations=6)
    tl = build_timeline(result, plan)
    kinds = {s.kind for s in tl.segments}
    assert "forward" in kinds and not {"backward", "weight_update"} & kinds
    assert tl.micro_batches_shown == 6
    result, plan = _simulate(2, gradient_accumulation=500)
    tl = build_timeline(result, plan, max_micro_batches=40)
    assert (tl.micro_batches_shown, tl.micro_batches_per_step) == (40, 500)
    assert len([s for s in tl.segments if s.kind == "forward"]) == 2 * 40


# --- in the browser ----------------------------------------------------------------------

_PROBE_HEAD = """<script>
(function () {
  var root = document.documentElement, seen = [];
  function note(kind, args) {
    seen.push(kind + ": " + Array.prototype.join.call(args, " "));
    root.setAttribute("data-probe-errors", JSON.stringify(seen));
  }
  window.addEventListener("error", function (e) { note("error", [e.message]); });
  window.addEventListener("unhandledrejection", function (e) { note("rejection", [e.reason]); });
  var error = console.error, warn = console.warn;
  console.error = function () { note("error", arguments); error.apply(console, arguments); };
  console.warn = function () { note("warn", arguments); warn.apply(console, arguments); };
})();
</script>"""
_PROBE_TAIL = """<script>
(function () {
  var table = document.querySelector('table[data-table="top_trials"]');
  var heads = table.tHead.rows[0].cells, col = -1;
  for (var i = 0; i < heads.length; i++) { if (heads[i].textContent === "samples/s") col = i; }
  function column() {
    return Array.prototype.map.call(table.tBodies[0].rows, function (r) {
      return parseFloat(r.cells[col].dataset.v);
    });
  }
  heads[col].click(); var asc = column();
  heads[col].click(); var desc = column();
  document.documentElement.setAttribute("data-probe-sort", JSON.stringify([asc, desc]));
})();
</script>"""


def chromium(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            # Any network request fails: the report must not need one.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--virtual-time-budget=5000",
        ]
        return subprocess.run(
            [str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=120
        )

    return run


def _attr(dom: str, name: str) -> Any:
    m = re.search(rf'{name}="([^"]*)"', dom)
    return json.loads(html.unescape(m.group(1))) if m else None


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_report_renders_in_headless_chromium(single: Any, tmp_path: Path) -> None:
    study, frame, cfg, result = single
    report = write_report(
        tmp_path / "report.html",
        study=study,
        results=frame,
        best_config=cfg,
        best_result=result,
        title="ipu-tune: resnet101 on 4 x Mk2",
    )
    text = report.read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(
        text.replace("<head>", "<head>" + _PROBE_HEAD, 1).replace(
            "</body>", _PROBE_TAIL + "</body>", 1
        )
    )
    run = chromium(tmp_path)
    proc = run("--enable-logging=stderr", "--v=0", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    assert not [ln for ln in console if "Uncaught" in ln or "rror" in ln], console
    assert _attr(dom, "data-probe-errors") is None
    rendered = figures(dom)
    assert set(rendered) == set(figures(text))
    for name, body in rendered.items():
        assert 'class="main-svg"' in body, f"figure {name} did not render"
    asc, desc = _attr(dom, "data-probe-sort")
    assert len(asc) == len(desc) == len(frame)
    # Plans that do not fit have no samples/s (an empty cell, null here): sorted apart.
    asc, desc = [v for v in asc if v is not None], [v for v in desc if v is not None]
    assert asc and asc == sorted(asc) and desc == sorted(desc, reverse=True)
    assert len(asc) == int(frame["throughput"].notna().sum())
    if os.environ.get("IPU_TUNE_UPDATE_SCREENSHOT") == "1":
        png = REPO / "docs" / "report.png"
        png.parent.mkdir(exist_ok=True)
        shot = run(
            "--hide-scrollbars", f"--screenshot={png}", "--window-size=1400,3000", report.as_uri()
        )
        assert shot.returncode == 0 and png.stat().st_size > 10_000


def _row(n: int, peak_mb: float, fits: bool, tp: float | None) -> dict[str, object]:
    return {"trial_number": n, "peak_memory_bytes": int(peak_mb * 1e6), "fits": fits,
            "throughput": tp, "memory_limit_bytes": int(900 * 1e6), "bottleneck": "x"}


def test_trials_figure_range_fits_the_plans_that_fit_or_every_plan_when_none_fits() -> None:
    from ipu_tune.report import trials_figure

    some = trials_figure([_row(0, 500, True, 10.0), _row(1, 16000, False, None)])
    hi = some["layout"]["xaxis"]["range"][1]
    assert hi == pytest.approx(900 * 1.15)  # the limit, not the 16,000 MB plan
    grey = next(t for t in some["data"] if t["name"].startswith("does not fit"))
    assert grey["x"] == [pytest.approx(hi * 0.99)] and "clipped" in grey["name"]
    none = trials_figure([_row(0, 7000, False, None), _row(1, 16000, False, None)])
    assert none["layout"]["xaxis"]["range"][1] == pytest.approx(16000 * 1.15)
    (grey,) = none["data"]
    assert grey["x"] == [pytest.approx(7000), pytest.approx(16000)]  # how far over each is
    assert "clipped" not in grey["name"]
