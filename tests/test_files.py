"""The one writer (`ipu_tune.files`): never onto something that is not a regular file, a set of
files replaced as a whole, no temporary left by a fault or a signal, stale ones removed."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.files import atomic_write, folder_lock, remove_stale_temps, write_files
from tests.conftest import REPO


def _targets(tmp: Path) -> dict[str, Path]:
    (tmp / "notes.txt").write_text("keep me")
    os.mkfifo(tmp / "fifo")
    (tmp / "link").symlink_to(tmp / "notes.txt")
    (tmp / "dangling").symlink_to(tmp / "nowhere")
    (tmp / "a_dir").mkdir()
    return {"FIFO": tmp / "fifo", "symlink": tmp / "link", "dangling symlink": tmp / "dangling",
            "directory": tmp / "a_dir", "character device": Path("/dev/full")}


@pytest.mark.parametrize("kind", ["FIFO", "symlink", "dangling symlink", "directory",
                                  "character device"])
def test_a_target_that_is_not_a_regular_file_is_refused_and_kept(
        kind: str, tmp_path: Path) -> None:
    target = _targets(tmp_path)[kind]
    before = os.lstat(target)
    with pytest.raises(IpuTuneError) as info:
        atomic_write(target, "x", key="--output")
    message = str(info.value)
    assert message.startswith(f"--output={str(target)!r}: exists and is a"), message
    assert "allowed: a regular file" in message and "\n" not in message
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_refused_member_writes_nothing_of_the_set(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("old")
    os.mkfifo(tmp_path / "b.py")
    with pytest.raises(IpuTuneError, match=r"b\.py"):
        write_files({tmp_path / "a.yaml": "new", tmp_path / "b.py": "new"})
    assert (tmp_path / "a.yaml").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.py"]


def test_a_fault_in_the_set_replaces_nothing_and_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {tmp_path / n: "new" for n in ("best.yaml", "a.py", "report.html")}
    for path in files:
        path.write_text("old")
    real, calls = os.fsync, []

    def full_on_the_third(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(27, "File too large")
        real(fd)

    monkeypatch.setattr(os, "fsync", full_on_the_third)
    with pytest.raises(IpuTuneError,
                       match=r"report\.html.*File too large.*raise the file-size limit"):
        write_files(files)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == dict.fromkeys(
        ("best.yaml", "a.py", "report.html"), "old")


def test_an_interrupt_while_writing_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.yaml").write_text("old")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_files({tmp_path / "a.yaml": "new", tmp_path / "b.yaml": "new"})
    assert [p.name for p in tmp_path.iterdir()] == ["a.yaml"]
    assert (tmp_path / "a.yaml").read_text() == "old"


def test_stale_temporaries_of_the_named_files_only_are_removed(tmp_path: Path) -> None:
    stale = [".best.yaml.ipu-tune-ab12cd_3.tmp", ".report.html.ipu-tune-x9y8z7w6.tmp",
             ".popart_options.py.ipu-tune-sh3p9976.tmp"]
    kept = ["best.yaml", ".notes.txt.ipu-tune-abcdefgh.tmp", ".best.yaml.ipu-tune-toolong12.tmp",
            ".best.yaml.ipu-tune-abcdefgh", ".best.yaml.bak"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    with folder_lock(tmp_path):
        removed = remove_stale_temps(
            tmp_path, ("best.yaml", "report.html", "popart_options.py"))
    assert sorted(p.name for p in removed) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


# A user's backups that look like a temporary (mkstemp's 8 characters, a date stamp, `.tmp` or
# none) and another user's file: no sweep takes them, in a study folder or beside --output.
_LOOK_ALIKES = (".best.yaml.backup01", ".report.html.20250101.tmp",
                ".poptorch_options.py.orig_v02", ".trials.csv.20241231.tmp",
                ".trials.csv.backup01")


@pytest.mark.parametrize("where", ["study folder", "--output"])
def test_a_users_look_alikes_and_another_users_temporary_are_kept(
        where: str, tmp_path: Path) -> None:
    for name in _LOOK_ALIKES:
        (tmp_path / name).write_text("user")
    others = tmp_path / ".best.yaml.ipu-tune-nobody01.tmp"  # marked, but another user's
    others.write_text("other")
    os.chown(others, 65534, 65534)  # nobody (the tests run as root: it may chown)
    (tmp_path / ".trials.csv.ipu-tune-nobody01.tmp").write_text("other")
    os.chown(tmp_path / ".trials.csv.ipu-tune-nobody01.tmp", 65534, 65534)
    before = sorted(p.name for p in tmp_path.iterdir())
    if where == "study folder":
        with folder_lock(tmp_path):
            assert remove_stale_temps(tmp_path, ("best.yaml", "report.html",
                                                 "poptorch_options.py")) == []
    else:
        atomic_write(tmp_path / "trials.csv", "a,b\n", key="--output")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "trials.csv") == before
    assert all((tmp_path / n).read_text() == "user" for n in _LOOK_ALIKES)


# A process writing sets of files in a loop, each set all of one version: a signal must leave
# every file of one version and no temporary.
_WRITER = """
import sys
from pathlib import Path
from ipu_tune import interrupts
from ipu_tune.files import write_files
interrupts.install()
out = Path(sys.argv[1])
names = ["best.yaml", "poptorch_options.py", "popart_options.py", "report.html"]
try:
    for version in range(1, 1_000_000):
        write_files({out / n: f"{version}\\n".encode() * 200_000 for n in names})
        if version == 1:
            (out / "ready").touch()
except KeyboardInterrupt as exc:
    sys.exit(interrupts.report(exc))
"""


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_leaves_the_set_whole_and_no_temporary(
        tmp_path: Path, sig: int, code: int) -> None:
    for delay in [i * 0.009 for i in range(16)]:  # across the writes and the renames
        out = tmp_path / f"d{delay}"
        out.mkdir()
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(out)],
                                env={**os.environ, "PYTHONPATH": str(REPO)},
                                stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 60
        while not (out / "ready").exists():
            assert time.monotonic() < end and proc.poll() is None, proc.stderr
            time.sleep(0.005)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == code, err
        assert "Traceback" not in err and err.count("\n") == 1, err
        names = sorted(p.name for p in out.iterdir())
        assert names == ["best.yaml", "popart_options.py", "poptorch_options.py", "ready",
                         "report.html"], names
        versions = {(out / n).read_bytes()[:12] for n in names if n != "ready"}
        assert len(versions) == 1, f"a mixed set: {versions}"
        assert all(stat.S_ISREG(os.lstat(out / n).st_mode) for n in names)


# A writer killed (SIGKILL) while its temporary beside `sys.argv[1]` is open and locked, or
# one that keeps writing (the temporary of a live process is never taken).
_HOLDER = """
import sys, time
from pathlib import Path
from ipu_tune.files import _write_temp
_write_temp(Path(sys.argv[1]), b"half")
print("ready", flush=True)
time.sleep(60)
"""


def _holder(target: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(target)], text=True,
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_a_killed_writers_temporary_beside_an_output_file_is_removed_by_the_next_write(
        tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    killed = _holder(out)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    mine = [".t.csv.bak", ".other.csv.ipu-tune-abcdefgh.tmp", "t.csv.ipu-tune-abcdefgh.tmp",
            ".t.csv.ipu-tune-abcdefgh", ".t.csv.abcdefgh.tmp", ".t.csv.20241231.tmp"]
    for name in mine:  # not this writer's temporaries of t.csv: a user's files
        (tmp_path / name).write_text("user")
    (tmp_path / ".t.csv.ipu-tune-zzzzzzzz.tmp").symlink_to(tmp_path / ".t.csv.bak")
    assert len(list(tmp_path.glob(".t.csv.ipu-tune-*.tmp"))) == 2
    atomic_write(out, "a,b\n", key="--output")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*mine, "t.csv", ".t.csv.ipu-tune-zzzzzzzz.tmp"])


def test_a_killed_writers_temporary_in_a_study_folder_is_removed_a_live_ones_kept(
        tmp_path: Path) -> None:
    killed = _holder(tmp_path / "best.yaml")
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    dead = [p.name for p in tmp_path.iterdir()]
    assert len(dead) == 1 and dead[0].startswith(".best.yaml.ipu-tune-"), dead
    live = _holder(tmp_path / "report.html")
    try:
        with folder_lock(tmp_path):
            removed = remove_stale_temps(tmp_path, ("best.yaml", "report.html"))
        assert [p.name for p in removed] == dead
        assert len(list(tmp_path.glob(".report.html.ipu-tune-*.tmp"))) == 1
    finally:
        live.kill()
        live.wait()


def test_a_live_writers_temporary_is_left_to_it(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    live = _holder(out)
    try:
        atomic_write(out, "a,b\n", key="--output")
        assert len(list(tmp_path.glob(".t.csv.ipu-tune-*.tmp"))) == 1
    finally:
        live.kill()
        live.wait()


def test_a_failed_write_leaves_no_folder_it_made_and_says_run_again_not_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(IpuTuneError) as info:
        atomic_write(tmp_path / "new" / "deeper" / "t.csv", "x", key="--output")
    assert "free space" in str(info.value) and "run the same command again" in str(info.value)
    assert "resume" not in str(info.value)
    with pytest.raises(IpuTuneError), folder_lock(tmp_path / "study"):  # a report's folder
        write_files({tmp_path / "study" / "report.html": "x"}, "report")
    assert list(tmp_path.iterdir()) == []
