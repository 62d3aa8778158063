"""Objectives named with units everywhere, the ladder, what-if commands, honest reports.

Every study here is a real (small) Optuna study of the seed experiment run by the tuner; every
figure checked is recomputed from the simulator, not copied from the code under test.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

import ipu_tune
from ipu_tune.cli._summary import format_summary
from ipu_tune.cli.studies_cmd import list_main, trials_main
from ipu_tune.config import TuneConfig, load_config, to_plain_dict
from ipu_tune.knobs import KNOBS, get_key, moot_keys
from ipu_tune.records import TrialRecord
from ipu_tune.search import OBJECTIVES
from ipu_tune.simulator import DEFAULT_CONSTANTS
from ipu_tune.tuner import RunSummary, run
from tests.report.test_report import _PROBE_HEAD, CHROMIUM, REPO, _attr, chromium, figures
from tests.search._helpers import compose_cfg

optuna.logging.set_verbosity(optuna.logging.WARNING)

PRESETS = ("throughput", "memory", "latency", "pareto", "fit")
N_TRIALS = 12


def _cfg(tmp: Path, *overrides: str) -> TuneConfig:
    cfg = compose_cfg("+experiment=seed_resnet101", *overrides)
    cfg.results_dir = str(tmp)
    cfg.study.n_trials = N_TRIALS
    cfg.study.progress_bar = False
    return cfg


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[RunSummary, Path]]:
    tmp = tmp_path_factory.mktemp("studies")
    out: dict[str, tuple[RunSummary, Path]] = {}
    for preset in PRESETS:
        out[preset] = (run(_cfg(tmp, f"search={preset}")), tmp)
    # No plan fits: the micro-batch pinned far beyond two IPUs' memory.
    nofit = _cfg(tmp, "search=throughput", "workload.micro_batch_size=2048",
                 "plan.precision=32.32", "study.name=nofit")
    out["nofit"] = (run(nofit, frozenset({"workload.micro_batch_size", "plan.precision"})), tmp)
    return out


def _eval_part(cfg: TuneConfig) -> dict[str, Any]:
    plain = to_plain_dict(cfg)
    return {k: plain[k] for k in ("model", "workload", "system", "plan")}


def a_splits(cfg: Any) -> list[str]:
    return list(cfg.plan.pipeline.splits)


def _studies_listing(tmp: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert list_main(["--results-dir", str(tmp)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("preset", PRESETS)
def test_summary_studies_and_report_name_the_objective_with_unit_and_value(
        studies: dict[str, tuple[RunSummary, Path]], preset: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    summary, tmp = studies[preset]
    assert summary.best_trial is not None and summary.best_result is not None
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp / "ipu_tune.journal")))
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    best = study.trials[summary.best_trial]
    names = list(summary.objectives)
    assert study.metric_names == [OBJECTIVES[n].metric for n in names]  # optuna-dashboard
    text = format_summary(summary)
    best_line = next(ln for ln in text.splitlines() if ln.startswith("best:"))
    listing = next(ln for ln in _studies_listing(tmp, capsys).splitlines()
                   if ln.startswith(summary.study_name + " "))
    report = (tmp / summary.study_name / "report.html").read_text()
    for name, value in zip(names, best.values, strict=True):
        o = OBJECTIVES[name]
        if name == "changes":
            continue
        shown = f"{o.title} {o.show(value)}"
        assert shown in best_line, (shown, best_line)
        assert shown in listing, (shown, listing)
        assert o.metric in report and o.show(value) in report
    first = OBJECTIVES[names[0]]
    if preset == "throughput":
        assert best_line.startswith(f"best: trial {best.number}, throughput ")
        assert "samples/s" in first.show(best.values[0])
    if preset == "memory":
        assert best_line.startswith(f"best: trial {best.number}, peak memory per IPU ")
        peak = max(summary.best_result.memory_per_ipu)
        assert first.show(best.values[0]) == f"{peak / 1e6:,.1f} MB"
    if preset == "latency":
        assert " ms" in best_line and "latency per call" in best_line
        assert best.values[0] == pytest.approx(summary.best_result.latency_s)
    if preset == "pareto":
        assert "throughput [samples/s] and memory headroom" in text
        assert "exported compromise" in text and "compromise" in report
    if preset == "fit":
        count = int(best.values[0])
        assert count == len(summary.changes) == TrialRecord.of(best).changes
        want = f"{count} change" + ("" if count == 1 else "s")
        assert want in best_line and want in listing
        user = load_config(_eval_part(_cfg(tmp)))
        got = load_config(dict(TrialRecord.of(best).config))
        for change in summary.changes:
            assert change in best_line
        # Each listed change is a knob whose value really differs from the user's plan, shown
        # as "label old -> new"; and every such knob is listed.
        differ = []
        for k in KNOBS:
            a, b = get_key(user, k.key), get_key(got, k.key)
            a, b = (list(v) if isinstance(v, list | tuple) else v for v in (a, b))
            moot = k.key in moot_keys(user, "image") | moot_keys(got, "image")
            if k.change and a != b and not moot:
                differ.append(k)
        assert len(differ) == count
        for k in differ:
            assert any(c.startswith(f"{k.label} ") and " -> " in c for c in summary.changes)


def test_latency_of_a_pipelined_inference_plan_is_its_call() -> None:
    cfg = {
        "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
        "workload": {"mode": "infer", "micro_batch_size": 16},
        "system": {"ipu": "mk2", "num_ipus": 2},
        "plan": {"precision": "16.16", "device_iterations": 54,
                 "pipeline": {"splits": ["layer3.8"], "schedule": "grouped"}},
    }
    r = ipu_tune.evaluate(cfg)
    assert r.fits
    # The call's outputs come back when it ends: its 54 micro-batches cross two synchronous
    # stages in 54 + 1 slots of the longest stage, after the call's own cost.
    slot = max(r.extras["stage_slot_s"])
    floor = 55 * slot + DEFAULT_CONSTANTS.infer_call_overhead_s
    assert floor <= r.latency_s < floor + 54 * r.extras["stream_copy_s"] + slot
    # Fewer device iterations: a shorter wait (2, the least PopTorch pipelines).
    cfg["plan"]["device_iterations"] = 2
    two = ipu_tune.evaluate(cfg)
    assert 3 * slot < two.latency_s < r.latency_s / 10
    from ipu_tune.search._objectives import objective_value
    assert objective_value("latency", r) == r.latency_s
    assert OBJECTIVES["latency"].show(r.latency_s) == f"{r.latency_s * 1e3:,.3f} ms"


def _evaluate(config: dict[str, Any]) -> ipu_tune.SimResult:
    return ipu_tune.evaluate(config)


def test_explain_climbs_from_the_seed_oom_plan_to_the_exported_best(
        studies: dict[str, tuple[RunSummary, Path]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from ipu_tune.cli.explain_cmd import main as explain_main

    summary, tmp = studies["throughput"]
    assert explain_main([summary.study_name, "--results-dir", str(tmp), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    steps = data["steps"]
    seed = yaml.safe_load((REPO / "conf/experiment/seed_resnet101.yaml").read_text())
    first = load_config(steps[0]["config"])
    assert first.plan.precision == seed["plan"]["precision"] == "32.32"
    assert first.plan.gradient_accumulation == seed["plan"]["gradient_accumulation"]
    assert list(first.plan.pipeline.splits) == seed["plan"]["pipeline"]["splits"]
    assert steps[0]["fits"] is False and steps[0]["bottleneck"] == "out_of_memory"
    assert data["start"] == steps[0]["change"] == "seed tutorial plan"  # +experiment=seed_...
    best_yaml = tmp / summary.study_name / "best.yaml"
    assert to_plain_dict(load_config(steps[-1]["config"])) == to_plain_dict(
        load_config(str(best_yaml)))
    assert data["best_trial"] == summary.best_trial
    for s in steps:  # each step's numbers are `evaluate` of that step's plan
        path = tmp_path / f"step{s['step']}.yaml"
        path.write_text(yaml.safe_dump(s["config"]))
        r = ipu_tune.evaluate(str(path))
        assert (r.fits, r.bottleneck) == (s["fits"], s["bottleneck"])
        assert r.throughput == pytest.approx(s["throughput"])
        assert max(r.memory_per_ipu) == s["peak_memory_bytes"]
        assert r.memory_limit_bytes == s["memory_limit_bytes"]
    for a, b in itertools.pairwise(steps):  # one knob per step unless coupled
        assert b["changes"] and (len(b["changes"]) == 1 or "splits" in b["change"]
                                 or "replicas" in b["change"])
        assert a["config"] != b["config"]
    fit0 = next(s for s in steps if s["fits"])
    assert steps[-1]["speedup"] == pytest.approx(steps[-1]["throughput"] / fit0["throughput"])
    assert steps[-1]["throughput"] == pytest.approx(summary.best_result.throughput)
    assert fit0["speedup"] == pytest.approx(1.0)
    # The table heads the report, with the sensitivity beside it.
    report = (tmp / summary.study_name / "report.html").read_text()
    assert 'data-table="ladder"' in report and 'data-table="sensitivity"' in report
    assert data["sensitivity"] and all(r["key"].startswith(("plan.", "workload."))
                                       for r in data["sensitivity"])


def test_no_fit_summary_shows_the_closest_plan_and_checked_remedies(
        studies: dict[str, tuple[RunSummary, Path]]) -> None:
    summary, tmp = studies["nofit"]
    assert summary.best_trial is None
    text = format_summary(summary)
    assert "no plan fits" in text
    assert summary.explanation is not None
    closest = summary.explanation.closest
    assert closest is not None
    assert f"closest plan: trial {closest.trial}" in text and "over by" in text
    assert closest.excess_bytes > 0 and closest.reason in text
    fitting = [r for r in closest.remedies if r["fits"]]
    assert fitting, closest.remedies
    for r in closest.remedies:  # each remedy is what the simulator says of its plan
        res = ipu_tune.evaluate(r["config"])
        assert res.fits == r["fits"] and res.throughput == pytest.approx(r["throughput"])
        assert r["remedy"] in text
    assert any(r["remedy"].startswith("micro-batch") for r in fitting)
    report = (tmp / summary.study_name / "report.html").read_text()
    head = report[: report.index("<h2>")]
    assert "No plan fits. Closest: trial" in report and 'data-note="no-fit"' in head + report


def test_explain_study_is_a_frozen_explanation_whose_json_is_what_the_cli_prints(
        studies: dict[str, tuple[RunSummary, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import dataclasses

    from ipu_tune.cli.explain_cmd import main as explain_main
    from ipu_tune.cli.studies_cmd import stored_problem
    from ipu_tune.explain import Explanation, explain_study

    summary, tmp = studies["nofit"]
    assert isinstance(summary.explanation, Explanation)
    args = argparse.Namespace(study=summary.study_name, storage=None, results_dir=str(tmp),
                              trust_remote_code=False)
    with stored_problem(args) as (study, _, _, problem):
        data = explain_study(study, problem, with_sensitivity=False)
    assert data.best_trial is None and data.closest is not None and data.steps == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.best_trial = 0  # type: ignore[misc]
    assert explain_main([summary.study_name, "--results-dir", str(tmp), "--json",
                         "--no-sensitivity"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(data.to_json()))
    assert printed["closest"]["trial"] == data.closest.trial


def test_evaluate_takes_hydra_style_overrides(studies: dict[str, tuple[RunSummary, Path]],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from ipu_tune.cli.evaluate_cmd import main as evaluate_main

    summary, tmp = studies["throughput"]
    path = str(tmp / summary.study_name / "best.yaml")
    assert evaluate_main([path, "plan.precision=32.32", "workload.micro_batch_size=8",
                          "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cfg = load_config(path)
    cfg.plan.precision = "32.32"
    cfg.workload.micro_batch_size = 8
    want = ipu_tune.evaluate(cfg)
    assert got["throughput"] == pytest.approx(want.throughput) and got["fits"] == want.fits
    assert evaluate_main([path, "plan.nope=1"]) == 2
    assert "plan.nope" in capsys.readouterr().err
    assert evaluate_main([path, "plan.precision=8.8"]) == 2
    assert "allowed: 32.32, 16.32, 16.16" in capsys.readouterr().err


def test_compare_marks_the_differences(studies: dict[str, tuple[RunSummary, Path]],
                                       capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    from ipu_tune.cli.compare_cmd import main as compare_main

    summary, tmp = studies["throughput"]
    a = str(tmp / summary.study_name / "best.yaml")
    seed = tmp_path / "seed.yaml"  # the seed experiment as a plain config file
    seed.write_text(yaml.safe_dump(_eval_part(_cfg(tmp_path))))
    b = str(seed)
    assert compare_main([a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    plan = {r["name"]: r for r in data["plan"]}
    assert plan["precision"]["b"] == "32.32"
    assert plan["precision"]["differs"] == (plan["precision"]["a"] != "32.32")
    assert plan["model.name"]["differs"] is False
    fits = {r["name"]: r for r in data["result"]}["fits"]
    assert fits["b"] is False and fits["a"] is True and fits["differs"]
    assert compare_main([a, b]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^precision\s+\S+\s+32\.32\s+\*$", text, re.M)


def test_trials_sorts_filters_and_names_columns_with_units(
        studies: dict[str, tuple[RunSummary, Path]],
        capsys: pytest.CaptureFixture[str]) -> None:
    summary, tmp = studies["pareto"]
    args = [summary.study_name, "--results-dir", str(tmp), "--csv"]
    assert trials_main([*args, "--sort", "peak MB/IPU", "--ascending", "--fits"]) == 0
    import io

    import pandas as pd
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert "throughput (samples/s)" in df.columns
    assert "memory headroom of the fullest IPU (%)" in df.columns
    assert df["feasible"].all() and list(df["peak MB/IPU"]) == sorted(df["peak MB/IPU"])
    assert trials_main([*args, "--where", "precision=16.16", "--top", "3"]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(df) <= 3 and (df["precision"].astype(str) == "16.16").all()
    assert trials_main([*args, "--sort", "nope"]) == 2
    assert "--sort='nope'" in capsys.readouterr().err


# --- the three reports in a browser ------------------------------------------------------------

@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
@pytest.mark.parametrize("which", ["throughput", "pareto", "nofit"])
def test_reports_render_with_the_exported_trial_marked(
        studies: dict[str, tuple[RunSummary, Path]], which: str, tmp_path: Path) -> None:
    summary, tmp = studies[which]
    report = tmp / summary.study_name / "report.html"
    text = report.read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("<head>", "<head>" + _PROBE_HEAD, 1))
    run_chromium = chromium(tmp_path)
    proc = run_chromium("--enable-logging=stderr", "--v=0", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    assert not [ln for ln in console if "Uncaught" in ln or "rror" in ln], console
    assert _attr(dom, "data-probe-errors") is None
    rendered = figures(dom)
    assert rendered and set(rendered) == set(figures(text))
    for name, body in rendered.items():
        assert 'class="main-svg"' in body, f"figure {name} did not render"
    if which == "nofit":
        assert "No plan fits. Closest: trial" in dom
        assert "exported: trial" not in text
    else:
        mark = f"exported: trial {summary.best_trial}"
        study_plots = [n for n in rendered if n in ("history", "pareto", "trials")]
        assert len(study_plots) >= 2
        for name in study_plots:  # the star's legend entry is drawn in every study plot
            assert mark in rendered[name], name
        assert 'class="exported" data-exported="1"' in dom
        row = re.search(r'<tr class="exported" data-exported="1"[^>]*>(.*?)</tr>', dom)
        assert row and f'data-v="{summary.best_trial}"' in row.group(1)
    # Trials that do not fit are PRUNED without a value: counted in the header, greyed on the
    # history's edge or left out of the Pareto plot, never drawn at a value.
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp / "ipu_tune.journal")))
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned and all(t.values is None for t in pruned)
    assert f"{len(pruned)} infeasible (pruned)" in dom
    if which == "pareto":
        assert f"({len(pruned)} that do not fit not drawn)" in text
    elif which == "nofit":  # no value anywhere: the history shows how close it came instead
        assert "No plan fits: peak memory per IPU by trial" in text
    else:
        assert "does not fit (no value; drawn on the axis edge)" in text
    if os.environ.get("IPU_TUNE_UPDATE_SCREENSHOT") == "1":
        png = REPO / "docs" / f"report-{which}.png"
        png.parent.mkdir(exist_ok=True)
        shot = run_chromium("--hide-scrollbars", f"--screenshot={png}", "--window-size=1400,3200",
                            report.as_uri())
        assert shot.returncode == 0 and png.stat().st_size > 10_000


def test_trace_compresses_a_long_step_and_draws_exchange_in_its_own_colour() -> None:
    from ipu_tune.plan import plan_from_config
    from ipu_tune.report import KIND_COLORS, build_timeline, timeline_figure

    cfg = load_config({
        "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
        "workload": {"micro_batch_size": 16}, "system": {"ipu": "mk2", "num_ipus": 2},
        "plan": {"precision": "16.16", "gradient_accumulation": 63,
                 "pipeline": {"splits": ["layer3.8"]}},
    })
    r = ipu_tune.evaluate(cfg)
    plan = plan_from_config(cfg)
    tl = build_timeline(r, plan, max_micro_batches=2 * plan.stages + 4)
    fig = timeline_figure(tl, r.step_time_s)
    assert tl.micro_batches_shown == 8 and tl.micro_batches_per_step == 63
    assert "steady state compressed: 8 of 63 micro-batches drawn, the other 55" in (
        fig["layout"]["title"]["text"])
    exch = [s for s in tl.segments if s.kind == "exchange"]
    work = [s for s in tl.segments if s.kind in ("forward", "backward", "exchange")]
    share = r.phases["exchange"] / (r.phases["exchange"] + r.phases["compute"])
    assert sum(s.duration_s for s in exch) == pytest.approx(
        share * sum(s.duration_s for s in work))
    colours = {t["name"]: t["marker"]["color"] for t in fig["data"]}
    assert colours["exchange"] == KIND_COLORS["exchange"]
    assert len(set(colours.values())) == len(colours)
    assert fig["layout"]["xaxis"]["title"]["text"] == "time (ms)"


def test_the_ladder_starts_from_your_plan_unless_it_is_the_seed_tutorials() -> None:
    from ipu_tune.explain import start_label

    seed = compose_cfg("+experiment=seed_resnet101")
    assert start_label(seed) == "seed tutorial plan"
    assert start_label(compose_cfg("+experiment=seed_mnist")) == "seed tutorial plan"
    assert start_label(compose_cfg("+experiment=seed_resnet101", "plan.precision=16.16")) \
        == "your plan"
    assert start_label(compose_cfg("model=resnet101")) == "your plan"


def test_pareto_ladder_ranks_each_step_by_the_compromise_rule(
        studies: dict[str, tuple[RunSummary, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    """Each step's change is the one whose plan is nearest the compromise ideal (the rule that
    picked the exported trial), not the fastest; the table header says so."""
    from ipu_tune.cli.explain_cmd import main as explain_main
    from ipu_tune.cli.studies_cmd import stored_problem
    from ipu_tune.knobs import set_key
    from ipu_tune.search import compromise

    summary, tmp = studies["pareto"]
    assert explain_main([summary.study_name, "--results-dir", str(tmp)]) == 0
    text = capsys.readouterr().out
    assert "steps ranked by: each step: the change whose plan is nearest the compromise" in text
    import argparse
    args = argparse.Namespace(study=summary.study_name, storage=None, results_dir=str(tmp),
                              trust_remote_code=False)
    from ipu_tune.explain import explain_study

    with stored_problem(args) as (study, _, _, problem):
        data = explain_study(study, problem, with_sensitivity=False)
    assert "compromise" in data.ladder_rank
    report = (tmp / summary.study_name / "report.html").read_text()
    assert "<caption>Steps ranked by: each step: the change whose plan is nearest" in report
    rule = compromise(study, problem.directions)
    assert rule is not None
    best = load_config(data.steps[-1]["config"])
    for a, b in itertools.pairwise(data.steps):
        if len(b["changes"]) != 1 or not b["fits"]:
            continue
        here = load_config(a["config"])
        chosen = problem.evaluate(load_config(b["config"]))
        d_chosen = rule.distance(chosen.values)
        for k in KNOBS:  # every other single change left at that step
            if get_key(here, k.key) == get_key(best, k.key) or k.key == "plan.pipeline.splits":
                continue
            cand = load_config(a["config"])
            set_key(cand, k.key, get_key(best, k.key))
            o = problem.evaluate(cand)
            if o.result.bottleneck == "invalid plan" or not o.feasible:
                continue
            assert rule.distance(o.values) >= d_chosen - 1e-12, (b["change"], k.key)


def test_a_latency_study_explains_in_latency(
        studies: dict[str, tuple[RunSummary, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    """The ladder and the sensitivity of a latency study show each plan's latency per call and
    its change, beside samples/s (which alone ranked nothing the study searched for)."""
    from ipu_tune.cli.explain_cmd import main as explain_main

    summary, tmp = studies["latency"]
    assert explain_main([summary.study_name, "--results-dir", str(tmp)]) == 0
    text = capsys.readouterr().out
    # The header names the unit its figures are shown in (it said the stored metric's [s]).
    assert text.splitlines()[0].endswith(": objective latency per call (ms)"), text
    ladder = next(ln for ln in text.splitlines() if ln.lstrip().startswith("step "))
    assert "latency per call" in ladder
    sensitivity = text.split("sensitivity of the best plan")[1].splitlines()
    assert "latency per call" in sensitivity[1]
    best_ms = summary.best_result.latency_s * 1e3 if summary.best_result else 0.0
    assert f"{best_ms:,.3f} ms" in text
    assert any(re.search(r"\d ms +[+-]\d+\.\d%", ln) for ln in sensitivity[2:])
