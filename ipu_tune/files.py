"""Every file ipu-tune writes: whole or not at all, and never onto something that is not a file.

One writer for the exports, the report, `export --output`, `calibrate --output` and the caches.
A target that exists and is not a regular file (a device such as /dev/full, a FIFO, a
directory, a symlink) is refused in one line and left alone: `os.replace` would swap it for a
regular file. Data goes to a temporary file `.NAME.ipu-tune-XXXXXXXX.tmp` beside the target first; a
set of files is written as temporaries first and then renamed together. SIGINT/SIGTERM are held
meanwhile (`ipu_tune.interrupts.held`) and stop the write only between two temporaries (which
are then removed) or after the last rename, so a signal or a full disk leaves the old set or
the new one, never a mix, and no temporary; those a SIGKILL leaves are removed by the next
write of the same file (beside an `--output` file too) or of a study folder, by one sweep
(`remove_stale_temps`). Folders a failed write made are removed again when empty.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ipu_tune import interrupts
from ipu_tune._own_files import CLAIMS_RUNNING, storage_file
from ipu_tune.errors import IpuTuneError, bad_value, disk_hint

__all__ = [
    "BAD_PLACE",
    "NOT_PSEUDO",
    "atomic_write",
    "check_places",
    "check_target",
    "folder_lock",
    "inside",
    "on_pseudo_filesystem",
    "remove_stale_temps",
    "write_files",
]

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# A place that cannot hold the file or folder asked for (a file where a folder belongs, a
# path under /proc): bad input, whatever the disk.
BAD_PLACE = frozenset({errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG,
                       errno.ENOENT})
# This writer's temporaries carry a marker no user's backup has (`.best.yaml.20250101.tmp`,
# `.report.html.backup01` are a user's): mkstemp's 8 random characters between `ipu-tune-` and
# `.tmp`. Names earlier versions wrote (`.NAME.XXXXXXXX[.tmp]`) are never swept: they cannot be
# told from a user's file, and one left over is harmless.
_TEMP_MARK = "ipu-tune-"
_TEMP = re.compile(rf"\.(?P<name>.+)\.{_TEMP_MARK}[a-z0-9_]{{8}}\.tmp")
_LOCK_TIMEOUT_S = 120.0
# A file written whole is written again, from the start: no study or file is resumed.
_AGAIN = "and run the same command again"
_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


# The kernel's views (processes, devices): no file a user writes belongs there, and what fails
# there fails with any errno (ENOENT, EACCES, EPERM) after a journal or lock was tried.
_PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"))
NOT_PSEUDO = "not under /proc or /sys"


def on_pseudo_filesystem(path: str | Path) -> bool:
    """Whether `path` resolves under /proc or /sys (`_PSEUDO_FILESYSTEMS`)."""
    resolved = Path(os.path.abspath(path))
    return any(resolved.is_relative_to(root) for root in _PSEUDO_FILESYSTEMS)


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path` is `root` or below it. Both resolved (symlinks, ..) and compared: the
    only test that a name cannot fool."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())


def check_target(path: Path, key: str) -> None:
    """Refuse, in one line naming `key`, a `path` that exists and is not a regular file, or is
    a storage's file (a journal, a SQLite database, their locks and claims)."""
    if Path(path).parent.name.endswith(CLAIMS_RUNNING):  # a worker's record, for recovery
        raise bad_value(key, str(path), "is in the folder of the workers' claims; allowed: a "
                        "file outside it")
    try:
        mode = os.lstat(path).st_mode
    except NotADirectoryError:  # a file where one of its folders belongs: never a folder
        _check_folders(list(Path(path).parents), key, f" of {str(path)!r}")
        return
    except OSError:
        return  # absent (or unreachable: the write itself says why)
    if stat.S_ISREG(mode):
        # A storage's file replaced by a YAML or CSV loses every study it holds.
        if (what := storage_file(path)) is not None:
            raise bad_value(key, str(path), f"exists and is {what}, which keeps the studies; "
                            "allowed: a new name or a file that no storage keeps")
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise bad_value(key, str(path), f"exists and is {kind}; allowed: a regular file or a new "
                    "name (anything else is never replaced)")


def _check_folders(folders: list[Path], key: str, of: str) -> None:
    """Refuse, naming `key`, the first of `folders` (nearest the root first) that exists and
    is not a folder: a write below it would fail (ENOTDIR, EEXIST) only after the work whose
    files it writes."""
    for folder in reversed(folders):
        if os.path.lexists(folder) and not folder.is_dir():
            raise bad_value(key, str(folder), f"exists and is not a folder, where a folder{of} "
                            "belongs; allowed: a folder or a new name")


def _fault(path: Path, exc: OSError, key: str) -> IpuTuneError:
    """One line naming `key` and the file. A place that cannot hold a file (a file where a
    folder belongs) is bad input; a full, read-only or forbidden disk is a fault (exit 1)."""
    bad = exc.errno in BAD_PLACE
    hint = ("; allowed: a file in a folder that holds files" if bad
            else f"; {disk_hint(exc.strerror or '', _AGAIN)}" if exc.errno in _DISK_FULL
            else "; make it writable, or choose another place")
    return IpuTuneError(f"{key}={str(path)!r}: cannot be written "
                        f"({exc.strerror or type(exc).__name__}){hint}", fault=not bad)


def _write_temp(path: Path, data: bytes) -> tuple[str, int]:
    """A fsync'd temporary beside `path` holding `data`, and its descriptor, which holds a
    `flock` on it until the rename (`remove_stale_temps` takes no temporary a live writer holds);
    removed again if this fails."""
    while True:  # one a sweep removed between its creation and its lock is made again
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_TEMP_MARK}",
                                   suffix=".tmp", dir=path.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            break
        os.close(fd)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes owner-only files; exports are for everyone
        with os.fdopen(os.dup(fd), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        os.close(fd)
        raise
    return tmp, fd


def _make_folders(folder: Path) -> list[Path]:
    """Make `folder` and the folders above it that are missing; returns those it made,
    deepest first (removed again when the write fails: no empty folder is left behind)."""
    missing = [f for f in (folder, *folder.parents) if not os.path.lexists(f)]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(folders: Iterable[Path]) -> None:
    """Remove each of `folders` (deepest first) if it is empty; one holding a file stays."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def check_places(paths: Iterable[Path], key: str, root: str | Path | None = None) -> None:
    """Refuse, in one line, a path that resolves outside `root` (when given) or exists and is
    not a regular file: what `write_files` checks before writing, and a run checks before its
    trials (a refused export must not wait for a finished search)."""
    if root is not None and on_pseudo_filesystem(root):
        raise bad_value("results_dir", str(root), f"allowed: a folder that can hold files "
                        f"({NOT_PSEUDO})")
    if root is not None:  # a file where results_dir or a folder above it belongs
        _check_folders([Path(root), *Path(root).parents], "results_dir", "")
    for path in paths:
        if root is not None and not inside(path, Path(root)):
            raise IpuTuneError(
                f"export path {str(path)!r}: resolves outside results_dir={str(root)!r} (a "
                "link); allowed: a path in results_dir (remove the link)")
        check_target(path, key)


def write_files(files: Mapping[Path, str | bytes], key: str = "output",
                root: str | Path | None = None) -> list[Path]:
    """Write every file whole, as one set: all temporaries first, then the renames with signals
    held. With `root`, every path must resolve under it. Refused targets and OSErrors (full
    disk, read-only place) are one line; nothing is replaced then and no temporary is left."""
    targets = [(Path(p), d.encode() if isinstance(d, str) else d) for p, d in files.items()]
    check_places([path for path, _ in targets], key, root)
    temps: list[tuple[str, int, Path]] = []
    made: list[Path] = []
    current = targets[0][0] if targets else Path()
    try:
        with interrupts.held():  # a signal stops the write between files, or after the renames
            for current, data in targets:
                made += _make_folders(current.parent)
                remove_stale_temps(current.parent, (current.name,))
                temps.append((*_write_temp(current, data), current))
                interrupts.stop_if_held()
            while temps:
                os.replace(temps[0][0], temps[0][2])
                os.close(temps.pop(0)[1])
        made = []
    except OSError as exc:
        raise _fault(current, exc, key) from None
    finally:
        for tmp, fd, _ in temps:
            Path(tmp).unlink(missing_ok=True)
            os.close(fd)
        _remove_empty(made)
    return [p for p, _ in targets]


def atomic_write(path: Path, text: str | bytes, root: str | Path | None = None,
                 key: str = "output") -> Path:
    """Write one file whole (`write_files`); returns `path`."""
    write_files({Path(path): text}, key, root)
    return Path(path)


def remove_stale_temps(folder: Path, names: Iterable[str]) -> list[Path]:
    """Remove the temporaries of `names` a killed writer (SIGKILL) left in `folder`: the one
    sweep, for a study folder and beside an `--output` file alike. Only this writer's names
    (`_TEMP`), regular files (a symlink is not followed), owned by this user, that no live
    writer holds: a writer keeps a `flock` on its temporary until the rename and the kernel
    drops a dead one's, so a live temporary is never taken, with or without `folder_lock`."""
    wanted = set(names)
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            found = _TEMP.fullmatch(entry.name)
            if (found is None or found["name"] not in wanted
                    or not entry.is_file(follow_symlinks=False)
                    or entry.stat(follow_symlinks=False).st_uid != os.getuid()):
                continue
            if _unlink_unheld(entry.path):
                removed.append(Path(entry.path))
    return removed


def _unlink_unheld(path: str) -> bool:
    """Unlink `path` if no process holds a `flock` on it (taken without waiting) and it is
    still the file checked: opened without following a symlink nor waiting on a FIFO swapped
    in since, a regular file of this user, not renamed over; whether it was."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a live writer's
        opened = os.fstat(fd)
        if (not stat.S_ISREG(opened.st_mode) or opened.st_uid != os.getuid()
                or opened.st_ino != os.lstat(path).st_ino):
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_lock(folder: Path, key: str = "export folder") -> Iterator[None]:
    """An exclusive `flock` on `folder` (created if missing) while a process writes its files;
    the kernel drops it with a killed process."""
    made: list[Path] = []
    try:
        made = _make_folders(folder)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        _remove_empty(made)
        raise _fault(folder, exc, key) from None
    try:
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise IpuTuneError(
                        f"{str(folder)!r}: another ipu-tune process has been writing its files "
                        f"for {_LOCK_TIMEOUT_S:.0f} s; run the command again when it ends"
                    ) from None
                time.sleep(0.05)
        yield
        made = []  # written: kept
    finally:
        os.close(fd)
        _remove_empty(made)  # a write that failed (a full disk) leaves no empty study folder
