"""`trials`: a --where value the column cannot take is one line saying what it takes, and the
figures a trial stored are printed bounded (a store anyone can write may hold anything)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ipu_tune.cli._trials_table import filter_rows
from ipu_tune.cli.studies_cmd import readable_table
from ipu_tune.errors import IpuTuneError
from tests.conftest import run_cli

_DF = pd.DataFrame({"trial": [1, 2], "precision": ["16.16", "32.32"], "fits": [True, False],
                    "samples/s": [10.0, 20.0]})


@pytest.mark.parametrize(("spec", "says"), [
    ("precision==16.16", "starts with an operator's character"),
    ("samples/s=>5", "starts with an operator's character"),
    ("precision=!16.16", "starts with an operator's character"),
    ("fits=maybe", "fits is a yes/no column; allowed: fits=yes, fits=no"),
    ("fits>0", "fits is a yes/no column"),
])
def test_a_where_value_the_column_cannot_take_is_refused(spec: str, says: str) -> None:
    with pytest.raises(IpuTuneError, match=re.escape(says)):
        filter_rows(_DF, spec)


@pytest.mark.parametrize(("spec", "trials"), [
    ("fits=yes", [1]), ("fits=True", [1]), ("fits=no", [2]), ("fits!=yes", [2]),
    ("fits=false", [2]), ("precision=16.16", [1]),
])
def test_a_yes_no_column_takes_yes_no_true_false(spec: str, trials: list[int]) -> None:
    assert list(filter_rows(_DF, spec)["trial"]) == trials


def test_absurd_figures_are_printed_bounded() -> None:
    df = pd.DataFrame({"trial": [1, 2, 3], "samples/s": [1e30, 5000.0, float("inf")],
                       "fits": [True] * 3, "feasible": [True] * 3,
                       "peak MB/IPU": [1e24, 800.0, None], "bottleneck": ["a", "b", "c"]})
    rows = [line.split() for line in readable_table(df).splitlines()[1:]]
    assert [r[1] for r in rows] == ["1e+30", "5,000.0", "inf"]
    assert [r[4] for r in rows] == ["1e+24", "800.0", "-"]


@pytest.mark.parametrize(("memory", "shown"), [
    ("[1e30,1e30]", "1e+24"), ("[-5,-5]", "-"), ('[\\"a\\",1]', "-"),
])
def test_stored_memory_is_shown_bounded_and_never_negative(
        memory: str, shown: str, stored_study: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(stored_study, results)
    journal = results / "ipu_tune.journal"
    text, count = re.subn(r'memory_per_ipu\\":\[[^]]*\]',
                          lambda _: f'memory_per_ipu\\":{memory}', journal.read_text())
    assert count
    journal.write_text(text)
    proc = run_cli(["trials", "s", "--results-dir", str(results)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    head, *rows = [ln for ln in proc.stdout.splitlines() if not ln.startswith("same in")]
    assert head.split()[:7] == ["trial", "throughput", "(samples/s)", "fits", "feasible",
                                "peak", "MB/IPU"]
    assert rows and all(r.split()[4] == shown for r in rows), proc.stdout
