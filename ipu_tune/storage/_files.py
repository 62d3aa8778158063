"""Files under results_dir: a study's export folder (written by `ipu_tune.files`)."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.config import check_name
from ipu_tune.errors import IpuTuneError
from ipu_tune.files import atomic_write, inside

__all__ = ["atomic_write", "study_dir"]


def study_dir(results_dir: str | Path, study_name: str) -> Path:
    """`<results_dir>/<study_name>`, refused with one line unless the name is a safe directory
    name and the folder resolves under results_dir (a stored study may predate the checks)."""
    check_name("study.name", study_name)
    root = Path(results_dir)
    out = root / study_name
    if not inside(out, root):
        raise IpuTuneError(f"study {study_name!r}: its folder {str(out)!r} resolves outside "
                           f"results_dir={str(root)!r} (a link); allowed: a folder in "
                           "results_dir (remove the link)")
    return out
