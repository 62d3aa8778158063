"""Bad input found by probing the commands from outside that is no one-line table case (its
table cases run with tests/cli/test_bad_input.py): a real process, an empty table, redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main
from ipu_tune.cli._trials_table import readable_table
from tests.conftest import run_cli


def test_a_group_null_in_a_real_process(tmp_path: Path) -> None:
    proc = run_cli(["system=null"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("ipu-tune: error: system=null: allowed: one option by name")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_matching_trial_is_one_line(stored_study: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Before: pandas' `Empty DataFrame`, `Columns: [...]` (every column) and `Index: []`."""
    with pytest.raises(SystemExit) as exit_info:
        main(["trials", "s", "--results-dir", str(stored_study), "--where", "samples/s>1e300"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == (
        "no trials to show: none finished, or none matches --where / --fits")


def test_an_empty_table_reads_as_a_line() -> None:
    import pandas as pd

    assert readable_table(pd.DataFrame({"trial": []})).startswith("no trials to show")


@pytest.mark.parametrize("flag", [["--cfg", "job"], ["--info", "config"], ["-c", "all"]])
def test_hydra_printing_the_config_redacts_a_password(
        flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `storage: postgresql://u:SECRETPW@...` printed as composed."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([*flag, "study.storage=postgresql://u:SECRETPW@127.0.0.1:1/x"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "storage: postgresql://u:***@127.0.0.1:1/x" in out
    assert "SECRETPW" not in out
