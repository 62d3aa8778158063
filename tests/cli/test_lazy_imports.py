"""Each command imports what it needs and no more: no torch for a stored study or a cached
model, no Hydra/Optuna for `--help`, none of Hydra, pandas, plotly, SQLAlchemy for a plain
1-trial run (a quick CLI). Checked in a fresh process per command, from its
`sys.modules` after the command ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ipu_tune.__main__ import COMMAND_NAMES
from tests.conftest import REPO, run_cli

HEAVY = ("torch", "hydra", "omegaconf", "optuna", "pandas", "plotly", "sqlalchemy", "joblib")

# Run one command in this process, then print the heavy modules it imported (last line).
_PROBE = """
import json, sys
from ipu_tune.__main__ import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))

STUDY = "resnet101-mk2x2-throughput"

# (arguments, modules that must not be loaded)
CASES: list[tuple[list[str], set[str]]] = [
    (["--help"], set(HEAVY)),
    (["evaluate", "results/" + STUDY + "/best.yaml"],
     {"torch", "hydra", "omegaconf", "optuna", "pandas", "plotly", "sqlalchemy"}),
    (["studies"], {"torch", "hydra", "omegaconf", "pandas", "plotly", "sqlalchemy"}),
    (["export", STUDY, "--output", "table.csv"], {"torch", "hydra", "plotly"}),
    (["report", STUDY], {"torch", "hydra", "omegaconf", "pandas", "plotly", "sqlalchemy"}),
]
# A 1-trial run on a fresh journal, once the profile and the composition of the defaults are
# cached (by the fixture's run): no Hydra/OmegaConf (composed from the cache), no SQLAlchemy
# (the journal's results table is SQLite through sqlite3), no pandas, no plotly (the report's
# figures are plain Plotly specs), no torch (cached profile).
CASES.append((["study.n_trials=1", "study.progress_bar=false", "results_dir=one"],
              {"torch", "hydra", "omegaconf", "pandas", "plotly", "sqlalchemy"}))
if "trials" in COMMAND_NAMES:
    CASES.append((["trials", STUDY], {"torch", "hydra", "plotly"}))


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored study (two trials) whose model profile is in the cache."""
    root = tmp_path_factory.mktemp("lazy")
    proc = run_cli(["study.n_trials=2", "study.progress_bar=false"], cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert (root / "results" / STUDY / "best.yaml").is_file()
    return root


@pytest.mark.parametrize(("args", "absent"), CASES, ids=[c[0][0] for c in CASES])
def test_command_imports_only_what_it_needs(
    args: list[str], absent: set[str], study_dir: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=study_dir, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe["code"] in (0, None), proc.stderr
    assert not absent & set(probe["loaded"]), f"{args[0]} imported {absent & set(probe['loaded'])}"


def test_help_lists_commands_and_main_settings() -> None:
    proc = subprocess.run([sys.executable, "-m", "ipu_tune", "--help"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    for word in (*COMMAND_NAMES, "study.n_trials", "study.storage", "study.workers",
                 "results_dir", "+model.kwargs.", "resnet101", "--hydra-help"):
        assert word in proc.stdout, word
