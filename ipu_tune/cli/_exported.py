"""Whether a stored study's exports are on disk, as `studies` lists it."""

from __future__ import annotations

from ipu_tune.config import NAME_MAX_CHARS, check_name
from ipu_tune.errors import IpuTuneError

__all__ = ["exported_note"]


def exported_note(results_dir: str, name: str, tag: str = "") -> str:
    """`, exported`, or why not: an interrupted study's exports are not written yet (`report`
    writes them); a study whose name no folder can have (made with Optuna directly, or before
    names were checked) or whose folder is a link out of results_dir cannot have any, and
    `report` refuses it, so it is not offered. `tag`: the storage's export tag, whose studies
    export to `<name>@<tag>` (`export_folder`, the exporter's rule)."""
    from ipu_tune.exports import BEST_YAML
    from ipu_tune.storage import export_folder, study_dir

    try:
        if (study_dir(results_dir, name, tag) / BEST_YAML).is_file():
            return ", exported"
    except IpuTuneError:
        try:
            check_name("study.name", export_folder(name, tag))
        except IpuTuneError:
            return (", not exported, and cannot be: its name is no safe folder name (1-"
                    f"{NAME_MAX_CHARS} letters, digits and . _ - + = @ , starting with a letter "
                    "or digit), so `report` refuses it")
        return (", not exported, and cannot be: its folder resolves outside results_dir, so "
                "`report` refuses it")
    return ", not exported (the `report` command writes its exports)"
