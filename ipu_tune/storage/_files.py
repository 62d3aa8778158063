"""Files under results_dir: a study's export folder, and writes that never leave half a file."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ipu_tune.config import check_name
from ipu_tune.errors import IpuTuneError

__all__ = ["atomic_write", "study_dir"]

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _inside(path: Path, root: Path) -> bool:
    # Resolve both (symlinks, ..) and compare: the only test that a name cannot fool.
    return path.resolve().is_relative_to(root.resolve())


def study_dir(results_dir: str | Path, study_name: str) -> Path:
    """`<results_dir>/<study_name>`, refused with one line unless the name is a safe directory
    name and the folder resolves under results_dir (a stored study may predate the checks)."""
    check_name("study.name", study_name)
    root = Path(results_dir)
    out = root / study_name
    if not _inside(out, root):
        raise IpuTuneError(f"study.name={study_name!r}: resolves outside results_dir={str(root)!r}")
    return out


def atomic_write(path: Path, text: str | bytes, root: str | Path | None = None) -> Path:
    """Write via a temporary file and `os.replace`, so readers never see half a file.

    With `root`, `path` must resolve under it (exports stay under results_dir). Any OSError
    (full disk, read-only place, a directory in the way, /proc) is one line, and the temporary
    file is removed, so nothing is half-written.
    """
    path = Path(path)
    if root is not None and not _inside(path, Path(root)):
        raise IpuTuneError(
            f"export path {str(path)!r}: resolves outside results_dir={str(root)!r}")
    data = text.encode() if isinstance(text, str) else text
    tmp: str | None = None
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; exports are for everyone
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        hint = "; free space and run the same command again" if exc.errno in _DISK_FULL else ""
        raise IpuTuneError(
            f"{str(path)!r}: cannot be written ({exc.strerror or type(exc).__name__}){hint}"
        ) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return path
