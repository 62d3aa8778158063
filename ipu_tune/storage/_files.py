"""Files under results_dir: a study's export folder (written by `ipu_tune.files`)."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.config import check_name
from ipu_tune.errors import IpuTuneError
from ipu_tune.files import atomic_write, inside

__all__ = ["atomic_write", "export_folder", "study_dir"]


def export_folder(study_name: str, tag: str = "") -> str:
    """The name of a study's export folder: `<study_name>` in the default storage,
    `<study_name>@<tag>` in the storage of export tag `tag` (`StorageTarget.export_tag`), so a
    study of one name in two storages has two folders. The one place of this rule: the
    exporter, its pre-flight check and `studies` all reach it through `study_dir`."""
    return f"{study_name}@{tag}" if tag else study_name


def study_dir(results_dir: str | Path, study_name: str, tag: str = "") -> Path:
    """`<results_dir>/<export_folder>`, refused with one line unless the folder's name is a safe
    directory name and the folder resolves under results_dir (a stored study may predate the
    checks)."""
    folder = export_folder(study_name, tag)
    check_name("study.name", folder)
    root = Path(results_dir)
    out = root / folder
    if not inside(out, root):
        raise IpuTuneError(f"study {study_name!r}: its folder {str(out)!r} resolves outside "
                           f"results_dir={str(root)!r} (a link); allowed: a folder in "
                           "results_dir (remove the link)")
    return out
