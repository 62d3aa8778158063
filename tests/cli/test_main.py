"""The main command as a user runs it: tune, resume, sweep, evaluate the export, list, report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, run_cli


def test_main_command_tunes_resumes_and_exports(tmp_path: Path) -> None:
    first = run_cli(["model=resnet101", "search=throughput", "study.n_trials=12"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    out_dir = tmp_path / "results" / "resnet101-mk2x2-throughput"
    for name in ("best.yaml", "poptorch_options.py", "report.html"):
        assert (out_dir / name).is_file(), name
    assert "best:" in first.stdout and "samples/s" in first.stdout
    assert "12 finished trials (12 run now)" in first.stdout

    again = run_cli(["model=resnet101", "search=throughput", "study.n_trials=12"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "12 finished trials (0 run now)" in again.stdout

    evaluated = run_cli(["evaluate", str(out_dir / "best.yaml"), "--json"], cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    best = yaml.safe_load((out_dir / "best.yaml").read_text())
    assert result["fits"] is True
    assert result["throughput"] == pytest.approx(best["ipu_tune"]["throughput"])

    readable = run_cli(["evaluate", str(out_dir / "best.yaml")], cwd=tmp_path)
    assert readable.returncode == 0 and "bottleneck" in readable.stdout.lower()

    listing = run_cli(["studies"], cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "resnet101-mk2x2-throughput" in listing.stdout and "12" in listing.stdout

    (out_dir / "report.html").unlink()
    rebuilt = run_cli(["report", "resnet101-mk2x2-throughput"], cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (out_dir / "report.html").is_file()

    table = tmp_path / "table.parquet"
    exported = run_cli(["export", "resnet101-mk2x2-throughput", "--output", str(table)],
                       cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert len(pd.read_parquet(table)) == 12


def test_multirun_sweeps_systems(tmp_path: Path) -> None:
    proc = run_cli(["-m", "system.num_ipus=2,4", "study.n_trials=4", "study.progress_bar=false"],
                   cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    for n in (2, 4):
        assert (tmp_path / "results" / f"resnet101-mk2x{n}-throughput" / "best.yaml").is_file()


def test_credentials_never_leave_the_url(tmp_path: Path, pg_url: str) -> None:
    secret = "Sup3rS3cret"
    url = pg_url.replace("postgres@", f"postgres:{secret}@")  # trust auth ignores it
    proc = run_cli([f"study.storage={url}", "study.name=creds", "study.n_trials=6"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert secret not in proc.stdout + proc.stderr
    for path in (tmp_path / "results").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    dump = subprocess.run(
        [sys.executable, "-c", (
            "import sys, pandas as pd, sqlalchemy as sa;"
            "e = sa.create_engine(sys.argv[1]);"
            "names = sa.inspect(e).get_table_names();"
            "print(names);"
            "[print(pd.read_sql(sa.text(f'select * from {n}'), e).to_csv()) for n in names]"
        ), pg_url], capture_output=True, text=True, cwd=REPO,
    )
    assert dump.returncode == 0, dump.stderr
    assert "creds" in dump.stdout and secret not in dump.stdout
    listing = run_cli(["studies", "--storage", url], cwd=tmp_path)
    assert listing.returncode == 0 and secret not in listing.stdout + listing.stderr


def test_search_space_files_cannot_instantiate(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    space = tmp_path / "evil.yaml"
    space.write_text(
        "knobs:\n"
        f"  precision: {{_target_: os.system, command: 'touch {marker}'}}\n"
        f"_target_: os.system\ncommand: touch {marker}\n"
        "!!python/object/apply:os.system ['touch pwned2']: 1\n"
    )
    proc = run_cli([f"search.space={space}", "study.n_trials=2"], cwd=tmp_path)
    assert proc.returncode == 2
    assert not marker.exists() and not (tmp_path / "pwned2").exists()
    assert proc.stderr.count("\n") == 1 and "evil.yaml" in proc.stderr


def test_target_only_in_the_model_section(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    proc = run_cli(["+plan._target_=os.system", "study.n_trials=1"], cwd=tmp_path)
    assert proc.returncode == 2 and "_target_" in proc.stderr
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"plan: {{_target_: os.system, command: 'touch {marker}'}}\n")
    proc = run_cli(["evaluate", str(cfg)], cwd=tmp_path)
    assert proc.returncode == 2 and not marker.exists()


def test_seed_ladder_from_the_command_line(tmp_path: Path) -> None:
    """The seed session automated: `fit` makes the out-of-memory plan fit; `throughput` beats
    the hand-tuned plan the session ends with."""
    import ipu_tune

    fit = run_cli(["+experiment=seed_resnet101", "search=fit", "study.n_trials=30",
                   "study.progress_bar=false"], cwd=tmp_path, timeout=300)
    assert fit.returncode == 0, fit.stderr
    fit_best = tmp_path / "results" / "resnet101-mk2x2-fit" / "best.yaml"
    start = yaml.safe_load(fit_best.read_text())
    assert ipu_tune.evaluate(fit_best).fits
    assert start["workload"]["micro_batch_size"] == 64

    fast = run_cli(["+experiment=seed_resnet101", "search=throughput", "study.n_trials=60",
                    "study.progress_bar=false"], cwd=tmp_path, timeout=300)
    assert fast.returncode == 0, fast.stderr
    found = ipu_tune.evaluate(tmp_path / "results" / "resnet101-mk2x2-throughput" / "best.yaml")
    hand = ipu_tune.evaluate({
        "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
        "workload": {"micro_batch_size": 64, "optimizer": "adamw"},
        "system": {"ipu": "mk2", "num_ipus": 2},
        "plan": {"precision": "16.16", "gradient_accumulation": 8, "device_iterations": 4,
                 "pipeline": {"splits": ["layer3.8"]}, "recompute": "checkpoints",
                 "eight_bit_io": True, "async_dataloader": True},
    })
    assert hand.fits and found.fits
    assert found.throughput > hand.throughput


def test_hydra_flags_given_with_a_space_are_flags(tmp_path: Path) -> None:
    """`--cfg job` prints the config: `job` is the flag's value, not an override."""
    proc = run_cli(["model=mnist_cnn", "--cfg", "job"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "results_dir: results" in proc.stdout
    proc = run_cli(["--info", "defaults"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sampler/tpe" in proc.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["--info", "-i"])
def test_info_without_its_value_after_the_overrides_is_info_all(flag: str,
                                                                tmp_path: Path) -> None:
    """`model=x --info` was argparse's usage block and `invalid choice: 'model=x'`: the flags
    go first, where argparse took the override as the flag's value."""
    proc = run_cli(["model=mnist_cnn", flag], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Defaults List" in proc.stdout and "name: mnist_cnn" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_flag_after_the_overrides_sweeps(tmp_path: Path) -> None:
    """`x=1,2 -m` is the sweep `-m x=1,2` (argparse stops at the first flag otherwise)."""
    proc = run_cli(["model=mnist_cnn", "study.n_trials=1", "study.progress_bar=false",
                    "system.num_ipus=2,4", "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "mnist_cnn-mk2x2-throughput" in proc.stdout
    assert "mnist_cnn-mk2x4-throughput" in proc.stdout


def test_a_library_warning_is_one_line_once(tmp_path: Path) -> None:
    """Optuna deprecates a TPE argument at each sampler built (two per run): Python printed
    the library's path and source line each time; it is one line, once."""
    proc = run_cli(["model=mnist_cnn", "study.n_trials=2", "study.progress_bar=false",
                    "+sampler.params.prior_weight=2.0"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ipu-tune: warning: `prior_weight`"), lines
    assert lines[0].endswith("(FutureWarning)")


def test_main_called_in_process_leaves_the_signals_to_its_caller() -> None:
    """Only the command's own process ignores SIGINT/SIGTERM for its shutdown: a caller of
    main(argv) (a test, a script) keeps handling them, and the processes it starts later do
    not inherit an ignored SIGTERM."""
    import signal

    from ipu_tune.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
