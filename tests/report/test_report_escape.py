"""Stored text is the attacker's: in report.html it is drawn as the very text stored.

A study may live in a shared storage, so its name, its knobs' names and values, its metric
names and its trials' stored results (bottleneck, reason) are anyone's. Plotly.js reads a
subset of HTML in the text it draws (`<a href>`, `<span style>`, `<b>`, entities) and `%{...}`
in a hover template as a field; the report must show such text as it is. These tests store
hostile text in a real study (a journal file, read back as `ipu-tune report` reads it), build
the report, open it in headless Chromium and read the drawn figures, hover labels included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

import ipu_tune
from ipu_tune.config import load_config, to_plain_dict
from ipu_tune.explain import Explanation
from ipu_tune.knobs import ModelFacts
from ipu_tune.records import TrialRecord, result_payload
from ipu_tune.report import write_report
from ipu_tune.results import row_from_trial
from ipu_tune.search import OBJECTIVES
from tests.report.test_report import (
    CHROMIUM,
    SEED_PLAN,
    _attr,
    _config,
    chromium,
    figures,
    plotly_specs,
)

# Each tag Plotly.js draws, an entity it decodes, a template field and a TeX span: drawn
# literally, none of them does anything.
EVIL = ('<a href="https://attacker.invalid/">link</a><span style="fill:#010203">styled</span>'
        "<b>bold</b><br><extra>x</extra> %{x} %{customdata[0]} &lt;i&gt; $tex$")
STUDY = "study " + EVIL
KNOB = "knob " + EVIL
VALUE = "value " + EVIL
BOTTLENECK = "bottleneck " + EVIL
REASON = "reason " + EVIL
METRIC = "metric " + EVIL
# One stage of 64 images at 32 bits: too large for one IPU, a stored plan that does not fit.
TOO_BIG = {**SEED_PLAN, "stages": 1, "micro_batch_size": 64, "precision": "32.32",
           "gradient_accumulation": 1, "available_memory_proportion": 1.0}

# Every figure's text, and every point hovered at once (`Plotly.Fx.hover` on a list of
# points draws a label for each), with what a hostile text could have made of the SVG.
_PROBE = """<script>
setTimeout(function () {
  function where(selector) {  // the figure of each element found, and the element
    return Array.prototype.map.call(document.querySelectorAll(selector), function (e) {
      var fig = e.closest("div.figure");
      return (fig ? fig.dataset.figure : "page") + ": " + e.outerHTML.slice(0, 200);
    });
  }
  function injected() {
    return {links: where(".js-plotly-plot svg a"), styled: where('[style*="010203"]')};
  }
  var out = {};
  document.querySelectorAll("div.figure").forEach(function (fig) {
    var gd = fig.querySelector(".js-plotly-plot");
    var texts = Array.prototype.map.call(gd.querySelectorAll("svg text"),
                                         function (t) { return t.textContent; });
    var points = [];
    gd.data.forEach(function (trace, i) {
      var n = Math.max((trace.x || []).length, (trace.y || []).length);
      for (var p = 0; p < n; p++) points.push({curveNumber: i, pointNumber: p});
    });
    Plotly.Fx.hover(gd, points, Object.keys(gd._fullLayout._plots));
    var layer = gd.querySelector(".hoverlayer");
    out[fig.dataset.figure] = {texts: texts, hover: layer.textContent, labels:
                               layer.querySelectorAll(".hovertext").length,
                               hovered: injected()};
    Plotly.Fx.unhover(gd);
  });
  out.page = {injected: injected(), h1: document.querySelector("h1").textContent,
              cells: Array.prototype.map.call(document.querySelectorAll("td"),
                                              function (c) { return c.textContent; })};
  document.documentElement.setAttribute("data-probe", JSON.stringify(out));
}, 300);  // after every figure's Plotly.newPlot has drawn
</script>"""


def _journal(path: Path) -> optuna.storages.JournalStorage:
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))


def _objective(n_objectives: int) -> Callable[[optuna.Trial], float | tuple[float, float]]:
    """The tuner's trial, with hostile text in every stored string the report reads."""
    def objective(trial: optuna.Trial) -> float | tuple[float, float]:
        cfg = load_config(_config(trial))
        trial.suggest_categorical(KNOB, [VALUE, "plain"])
        result = ipu_tune.evaluate(cfg)
        payload = result_payload(result)
        payload["bottleneck"] = payload["detail"]["bottleneck"] = BOTTLENECK
        if not result.fits:
            payload["reason"] = payload["detail"]["reason"] = REASON
        TrialRecord.write_plan(trial, to_plain_dict(cfg), payload)
        peak = float(max(result.memory_per_ipu))
        TrialRecord.write_constraints(trial, ["memory"], [peak / result.memory_limit_bytes - 1])
        if not result.fits:  # the tuner's infeasible trial: pruned, its reason stored
            TrialRecord.write_outcome(trial, REASON)
            raise optuna.TrialPruned(REASON)
        return result.throughput if n_objectives == 1 else (result.throughput, peak)

    return objective


def hostile_study(path: Path, directions: tuple[str, ...]) -> optuna.Study:
    """A study in a journal file with hostile text stored everywhere, read back anew."""
    study = optuna.create_study(storage=_journal(path), study_name=STUDY,
                                directions=list(directions),
                                sampler=optuna.samplers.RandomSampler(seed=4))
    study.set_metric_names([f"{METRIC} {i}" for i in range(len(directions))])
    study.enqueue_trial({**SEED_PLAN, KNOB: VALUE})
    study.enqueue_trial({**TOO_BIG, KNOB: VALUE})
    study.optimize(_objective(len(directions)), n_trials=6)
    return optuna.load_study(study_name=STUDY, storage=_journal(path))


def _explanation(study: optuna.Study, best: int) -> Explanation:
    """What `explain_study` gives the report of a throughput search (no ladder)."""
    o = OBJECTIVES["throughput"]
    row = {"name": o.name, "metric": o.metric, "axis": o.axis(), "scale": o.scale,
           "direction": o.direction, "best_value": None, "best_shown": None}
    return Explanation(study=study.study_name, objective=o.name, metric=o.metric,
                       objectives=(row,), rule="the best", model=ModelFacts("image"), start="",
                       ladder_rank="", best_trial=best)


def build(tmp_path: Path, directions: tuple[str, ...], explained: bool) -> Path:
    """report.html of a hostile study, as `ipu-tune report` builds it from a stored study."""
    study = hostile_study(tmp_path / "shared.journal", directions)
    trials = study.get_trials(deepcopy=False)
    rows = [row_from_trial(study.study_name, t) for t in trials]
    assert {r["fits"] for r in rows} == {True, False}, "both kinds of trial are drawn"
    # The stored result of the plan that does not fit, as `report` reads a stored best.
    bad = TrialRecord.of(trials[1])
    best = study.best_trials[0].number
    return write_report(
        tmp_path / "report.html", study=study, results=rows,
        best_config=load_config(dict(bad.config)), best_result=bad.sim_result(),
        title=f"ipu-tune: {study.study_name}", best_trial=best,
        explanation=_explanation(study, best) if explained else None)


def render(tmp_path: Path, directions: tuple[str, ...], explained: bool) -> dict[str, Any]:
    """Build the report of a hostile study, open it in Chromium: what `_PROBE` read."""
    text = build(tmp_path, directions, explained).read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", _PROBE + "</body>", 1))
    proc = chromium(tmp_path)("--enable-logging=stderr", "--v=0", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen: dict[str, Any] = _attr(proc.stdout, "data-probe")
    assert seen is not None, "the probe did not run"
    assert set(seen) == {*figures(text), "page"}
    seen["page"]["console"] = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return seen


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def _drawn(seen: dict[str, Any], figure: str, literal: str) -> bool:
    return any(literal in t for t in seen[figure]["texts"])


# Directions, and whether the report has the study explained: without, the history (or Pareto
# front) is Optuna's own figure; with it, the report's.
_CASES: dict[str, tuple[tuple[str, ...], bool]] = {
    "one objective": (("maximize",), False),
    "two objectives": (("maximize", "minimize"), False),
    "explained": (("maximize",), True),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_no_figure_holds_stored_text_as_plotly_would_read_it(case: str, tmp_path: Path) -> None:
    """Without a browser: every text of every figure spec holds the stored text escaped."""
    directions, explained = _CASES[case]
    specs = plotly_specs(build(tmp_path, directions, explained).read_text())
    texts = [t for data, layout in specs.values() for t in _strings([data, layout])]
    stored = [t for t in texts if "attacker.invalid" in t]
    assert stored, "the stored text is drawn somewhere"
    for raw in ("<a ", "<span", "<b>", "<extra>x", "%{x} ", "$tex$", "&lt;i"):
        assert not [t for t in stored if raw in t], raw
    assert [t for t in stored if 'knob &lt;a href="https://attacker.invalid/"&gt;' in t]


@pytest.mark.skipif(not CHROMIUM.exists(),
                    reason="needs /usr/bin/chromium (apt-get install chromium)")
@pytest.mark.parametrize("case", list(_CASES))
def test_stored_text_is_drawn_literally_and_injects_nothing(case: str, tmp_path: Path) -> None:
    """In Chromium: no link or style of the attacker's in any figure, hovered or not, and the
    stored text drawn as it was stored."""
    directions, explained = _CASES[case]
    seen = render(tmp_path, directions, explained)
    page = seen.pop("page")
    assert page["injected"] == {"links": [], "styled": []}
    for name, fig in seen.items():
        assert fig["hovered"] == {"links": [], "styled": []}, name
        assert fig["labels"] > 0, f"{name}: nothing was hovered"
    # The tables and the title were escaped already (html.escape): the same text.
    assert page["h1"] == f"ipu-tune: {STUDY}"
    assert STUDY in page["cells"] and BOTTLENECK in page["cells"]
    # The best plan: a stored result that does not fit, with its stored reason and bottleneck.
    assert _drawn(seen, "memory", f"does not fit: {REASON}")
    assert _drawn(seen, "phases", f"bottleneck {BOTTLENECK}")
    # The knob's name on the importances' axis and in their hover.
    assert _drawn(seen, "importances", KNOB) and KNOB in seen["importances"]["hover"]
    assert BOTTLENECK in seen["trials"]["hover"] and REASON in seen["trials"]["hover"]
    if explained:  # the report's own history: the stored reason of a plan that does not fit
        assert REASON in seen["history"]["hover"]
    elif len(directions) == 2:  # Optuna's Pareto front: its hover lists every parameter
        hover = seen["pareto"]["hover"]
        assert json.dumps(KNOB) in hover and json.dumps(VALUE) in hover
        assert _drawn(seen, "pareto", f"{METRIC} 0") and _drawn(seen, "pareto", f"{METRIC} 1")
    # No script error, no hover-template field that was not the report's own ("Variable
    # 'customdata[0]' in hovertemplate could not be found") and no `$...$` read as TeX.
    assert not [ln for ln in page["console"]
                if "Uncaught" in ln or "rror" in ln or "MathJax" in ln or "hovertemplate" in ln]
