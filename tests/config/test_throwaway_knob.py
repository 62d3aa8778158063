"""A knob declared in `ipu_tune/knobs.py` alone reaches every place a knob belongs.

The test copies the package, adds one entry to the copy's `PLAN_KNOBS` (no other file is
touched) and runs the real commands on the copy in subprocesses: the CLI override, the schema,
validation, the search space, the results table, the report, the best-plan export and
`evaluate`'s output all show the new knob.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import ipu_tune

_ENTRY = '''    Knob("plan.throwaway_mode", "throwaway_mode", str, "calm", "str8", "throwaway col",
         "throwaway", "categorical", domain=("calm", "wild")),
'''
_PROBE = """
import dataclasses
from ipu_tune.config import PlanConfig, TuneConfig, validate
from ipu_tune.plan import ExecutionPlan, plan_from_config
from ipu_tune.search import parse_space
print("schema", {f.name: f.default for f in dataclasses.fields(PlanConfig)}["throwaway_mode"])
cfg = TuneConfig()
cfg.plan.throwaway_mode = "wild"
print("plan", plan_from_config(cfg).throwaway_mode, ExecutionPlan().throwaway_mode)
space = parse_space({"knobs": {"plan.throwaway_mode": None}})
print("space", space.knobs["plan.throwaway_mode"].choices)
from ipu_tune.exports import export_context
print("exporters' context", export_context(cfg).plan.throwaway_mode)
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package whose knobs.py declares one more plan knob."""
    root = tmp_path_factory.mktemp("pkg")
    shutil.copytree(Path(ipu_tune.__file__).parent, root / "ipu_tune",
                    ignore=shutil.ignore_patterns("__pycache__"))
    knobs = root / "ipu_tune" / "knobs.py"
    text = knobs.read_text()
    anchor = "\n)\n\n# Every knob, in schema order"
    assert text.count(anchor) == 1  # the end of PLAN_KNOBS
    knobs.write_text(text.replace(anchor, "\n" + _ENTRY.rstrip("\n") + anchor))
    return root


def _run(package: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(package)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_copy_runs_its_own_knobs_declaration(package: Path, tmp_path: Path) -> None:
    proc = _run(package, ["-c", "import ipu_tune.knobs as k; print(k.__file__)"], tmp_path)
    assert proc.stdout.strip() == str(package / "ipu_tune" / "knobs.py")


def test_new_knob_is_in_the_schema_the_plan_the_space_and_the_exporters_context(
        package: Path, tmp_path: Path) -> None:
    proc = _run(package, ["-c", _PROBE], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "schema calm", "plan wild calm", "space ('calm', 'wild')", "exporters' context wild"]


def test_new_knob_is_validated_with_its_key_value_and_allowed_values(
        package: Path, tmp_path: Path) -> None:
    proc = _run(package, ["-m", "ipu_tune", "plan.throwaway_mode=stormy",
                          "study.progress_bar=false"], tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "plan.throwaway_mode='stormy': allowed: calm, wild")
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_new_knob_set_on_the_command_line_reaches_store_exports_report_and_evaluate(
        package: Path, tmp_path: Path) -> None:
    proc = _run(package, ["-m", "ipu_tune", "plan.throwaway_mode=wild", "study.n_trials=3",
                          "study.progress_bar=false"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan_line = next(x for x in proc.stdout.splitlines() if x.startswith("plan: "))
    assert plan_line.endswith(", throwaway wild")
    (study,) = (tmp_path / "results").glob("*/best.yaml")
    assert "  throwaway_mode: wild\n" in study.read_text()
    report = (study.parent / "report.html").read_text()
    assert "throwaway col" in report and "wild" in report
    with sqlite3.connect(tmp_path / "results" / "results.db") as db:
        columns = {row[1] for table in ("ipu_tune_results",)
                   for row in db.execute(f"PRAGMA table_info({table})")}
        assert "throwaway_mode" in columns, columns
        assert {v for (v,) in db.execute("SELECT throwaway_mode FROM ipu_tune_results")} == {"wild"}
    evaluated = _run(package, ["-m", "ipu_tune", "evaluate", str(study)], tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    assert ", throwaway wild\n" in evaluated.stdout
