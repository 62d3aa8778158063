"""Hydra reads only the package's conf/ and the checked files of a --config-dir: a group path
with `..` (on the command line or in a defaults list), a group folder linked elsewhere, or a
primary config of another name never reaches a file no check has read. Each payload would run
code without the trust flag (a Hydra callback making a file), move Hydra's files out of
results_dir or resolve a secret; none may, and nothing may land outside the results folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ipu_tune.config import CONF_DIR
from tests.conftest import run_cli

QUICK = ["model=mnist_cnn", "study.n_trials=1", "study.progress_bar=false"]
SECRET = "Hunter2-EnvSecret"
PASSWORD = "S3cr3tPw"


def _callback(marker: Path, target: str = "logging.FileHandler") -> str:
    """A file whose Hydra callback makes `marker` when Hydra instantiates it (no import of
    anything of the user's: the standard library's FileHandler opens its file)."""
    return ("# @package _global_\nhydra:\n  callbacks:\n    x:\n"
            f"      _target_: {target}\n      filename: {marker}\n")


def _escape(tmp: Path) -> str:
    return ("# @package _global_\nhydra:\n"
            f"  run:\n    dir: {tmp / 'ESCAPE-run'}\n  sweep:\n    dir: {tmp / 'ESCAPE-sweep'}\n"
            "  output_subdir: .hydra\n  job:\n    chdir: true\n")


def _setup(tmp_path: Path, payload: str) -> Path:
    """cwd `work` with an empty config dir `cfg/experiment`; the payload in `elsewhere/p.yaml`,
    beside the config dir, and the same file in `cfg2/experiment` linked to `elsewhere/`."""
    work = tmp_path / "work"
    (work / "cfg" / "experiment").mkdir(parents=True)
    (work / "elsewhere").mkdir()
    (work / "elsewhere" / "p.yaml").write_text(payload)
    (work / "cfg2").mkdir()
    os.symlink(work / "elsewhere", work / "cfg2" / "experiment")
    return work


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _refused(tmp_path: Path, work: Path, args: list[str], env: dict[str, str] | None = None
             ) -> str:
    """Run; assert one line, exit 2, no marker, nothing new outside results/; the line."""
    before = _files(tmp_path)
    proc = run_cli([*QUICK, f"results_dir={work / 'results'}", *args], cwd=work, env=env)
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, err, proc.stdout[-500:])
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("ipu-tune: error: ") and "allowed:" in err, err
    assert not (tmp_path / "PWNED").exists()
    new = {p for p in _files(tmp_path) - before if work / "results" not in p.parents}
    assert new == set(), new
    for text in (proc.stdout, err):
        assert SECRET not in text and PASSWORD not in text
    return err


# (case, the payload's kind, the arguments; `{cfg}`: the config dir's path from `work`).
ROUTES = [
    ("defaults entry with ..", "defaults", ["--config-dir", "cfg", "+experiment=nice"]),
    ("defaults group option with ..", "group_defaults",
     ["--config-dir", "cfg", "+experiment=nice"]),
    ("command line +experiment=..", "", ["--config-dir", "cfg", "+experiment=../../elsewhere/p"]),
    ("command line model=..", "", ["--config-dir", "cfg",
                                   "model=../../../../../../../../../{work}/elsewhere/p"]),
    ("command line sweep with ..", "",
     ["-m", "--config-dir", "cfg", "+experiment=nice2,../../elsewhere/p"]),
    ("group folder linked outside the config dir", "", ["--config-dir", "cfg2",
                                                       "+experiment=p"]),
    ("--config-name with ..", "", ["--config-dir", "cfg", "--config-name", "{rel}"]),
]


def _write_route(work: Path, kind: str) -> None:
    nice = work / "cfg" / "experiment" / "nice.yaml"
    (work / "cfg" / "experiment" / "nice2.yaml").write_text("# @package _global_\n{}\n")
    if kind == "defaults":
        nice.write_text("# @package _global_\ndefaults:\n  - /experiment/../../elsewhere/p\n")
    elif kind == "group_defaults":
        nice.write_text("# @package _global_\ndefaults:\n  - /experiment: ../../elsewhere/p\n")


@pytest.mark.parametrize(("case", "kind", "args"), ROUTES, ids=[r[0] for r in ROUTES])
def test_a_file_outside_the_config_dir_runs_no_callback(
        case: str, kind: str, args: list[str], tmp_path: Path) -> None:
    work = _setup(tmp_path, _callback(tmp_path / "PWNED"))
    _write_route(work, kind)
    rel = os.path.relpath(work / "elsewhere" / "p", CONF_DIR)
    err = _refused(tmp_path, work, [a.replace("{work}", str(work).lstrip("/")).replace(
        "{rel}", rel) for a in args])
    assert "blocklisted" not in err


def test_a_blocklisted_target_outside_the_config_dir_is_one_whole_line(tmp_path: Path) -> None:
    """Hydra's own blocklist message was cut to "... is blocklisted because it allows"."""
    work = _setup(tmp_path, _callback(tmp_path / "PWNED", "os.system"))
    _write_route(work, "defaults")
    err = _refused(tmp_path, work, ["--config-dir", "cfg", "+experiment=nice"])
    assert "cfg/experiment/nice.yaml" in err and "'..'" in err, err


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_hydra_dirs_outside_the_config_dir_move_nothing(sweep: bool, tmp_path: Path) -> None:
    """hydra.run.dir / sweep.dir / output_subdir / job.chdir from a file reached with `..`
    would write .hydra/*.yaml, with the storage password, outside results_dir."""
    work = _setup(tmp_path, _escape(tmp_path))
    # (a sweep refuses a password on its command line: its record is Hydra's)
    storage = [] if sweep else [f"study.storage=postgresql://u:{PASSWORD}@127.0.0.1:1/db"]
    _refused(tmp_path, work, [*(["-m"] if sweep else []), "--config-dir", "cfg",
                              "+experiment=../../elsewhere/p", *storage])
    assert not (tmp_path / "ESCAPE-run").exists() and not (tmp_path / "ESCAPE-sweep").exists()


def test_a_resolver_outside_the_config_dir_reads_no_secret(tmp_path: Path) -> None:
    work = _setup(tmp_path, '# @package _global_\nstudy:\n  name: "${oc.env:PGPASSWORD}"\n')
    _refused(tmp_path, work, ["--config-dir", "cfg", "+experiment=../../elsewhere/p"],
             env={"PGPASSWORD": SECRET})
    assert not any(SECRET in p.name for p in _files(tmp_path))


def test_a_group_of_the_config_dir_takes_only_its_own_options(tmp_path: Path) -> None:
    """A group folder of the user's (`+mine=x`): an option with a path leads out of it."""
    work = _setup(tmp_path, _callback(tmp_path / "PWNED"))
    (work / "cfg" / "mine").mkdir()
    (work / "cfg" / "mine" / "ok.yaml").write_text("{}\n")
    err = _refused(tmp_path, work, ["--config-dir", "cfg", "+mine=../../elsewhere/p"])
    assert "mine='../../elsewhere/p'" in err, err


@pytest.mark.parametrize("form", ["plan.{k}=1", "+plan.{k}=1", "~plan.{k}", "{k}=1"])
def test_an_override_key_too_long_for_a_file_name_is_one_line(form: str, tmp_path: Path
                                                               ) -> None:
    """Hydra looks each key up as a folder of its search path: ENAMETOOLONG, a traceback."""
    work = _setup(tmp_path, "{}\n")
    err = _refused(tmp_path, work, [form.replace("{k}", "k" * 256)])
    assert "a key of" in err, err


def test_a_config_dir_of_the_whole_disk_is_refused_at_once(tmp_path: Path) -> None:
    work = _setup(tmp_path, "{}\n")
    start = time.monotonic()
    err = _refused(tmp_path, work, ["--config-dir", "/"])
    assert time.monotonic() - start < 30
    assert "--config-dir='/'" in err, err


@pytest.mark.parametrize("flag", ["--config-path", "-cp", "--config-name", "-cn"])
def test_the_primary_config_cannot_be_replaced(flag: str, tmp_path: Path) -> None:
    work = _setup(tmp_path, "{}\n")
    err = _refused(tmp_path, work, [flag, str(work / "cfg")])
    assert err.startswith(f"ipu-tune: error: {flag}: ") and "--config-dir" in err, err


def test_a_config_dir_with_linked_folders_and_group_paths_still_runs(tmp_path: Path) -> None:
    """What Hydra users write stays allowed: `/group/name@package`, `override /group: name`,
    a group folder that is a symlink (its files are checked like the others)."""
    work = _setup(tmp_path, "# @package _global_\nstudy:\n  n_trials: 1\n")
    (work / "cfg" / "experiment" / "ok.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /system/pod16@system\n"
        "  - override /model: mnist_cnn\n")
    for cfg, name in (("cfg", "ok"), ("cfg2", "p")):
        proc = run_cli([*QUICK, f"results_dir={work / 'results'}", "--config-dir", cfg,
                        f"+experiment={name}"], cwd=work)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("header", ["#@package hydra", "#   @package hydra"])
def test_a_header_hydra_reads_as_a_package_is_checked_as_one(header: str, tmp_path: Path) -> None:
    """Hydra takes `#@package hydra` (no space) as a package; a check that looked for
    `# @package` only let the file set Hydra's output folders and logging."""
    work = _setup(tmp_path, "")
    (work / "cfg" / "experiment" / "z.yaml").write_text(
        f"{header}\noutput_subdir: {tmp_path / 'ESCAPE-subdir'}\n"
        f"run:\n  dir: {tmp_path / 'ESCAPE-run'}\n")
    err = _refused(tmp_path, work, ["--config-dir", "cfg", "+experiment=z"])
    assert "hydra" in err, err
    assert not (tmp_path / "ESCAPE-subdir").exists() and not (tmp_path / "ESCAPE-run").exists()
