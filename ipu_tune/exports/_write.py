"""Render every export of a best plan once and write those with a file beside best.yaml."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ipu_tune.files import write_files

from ._choose import PlanChooser, StoredTrials
from ._context import ExportContext
from ._registry import EXPORTERS

__all__ = ["EXPORT_FILE_NAMES", "Exports", "prepare_exports", "render_exports", "write_exports"]

# Every file an export may write in a study folder (whose stale temporaries a write removes).
EXPORT_FILE_NAMES = tuple(e.file_name for e in EXPORTERS if e.file_name is not None)


@dataclass(frozen=True)
class Exports:
    """The rendered texts (exporter name -> text), the files written (name -> path) and, for an
    export holding another plan than the best (its framework cannot run the best's schedule),
    the line its header gives about it (name -> line; ipu_config.json has no header: the line is
    run_with_optimum.py's, which loads it)."""

    texts: dict[str, str]
    paths: dict[str, Path]
    stand_ins: dict[str, str] = field(default_factory=dict)

    def files(self, out_dir: Path) -> dict[str, Path]:
        """Exporter name -> the file it writes under `out_dir` (those with a file only)."""
        return {e.name: out_dir / e.file_name for e in EXPORTERS
                if e.file_name is not None and e.name in self.texts}


def _render(ctx: ExportContext, stored: StoredTrials | None) -> Exports:
    chooser = PlanChooser(ctx, stored)
    texts: dict[str, str] = {}
    stand_ins: dict[str, str] = {}
    for e in EXPORTERS:
        plan = chooser.context_for(e.schedules)
        if not e.applies(plan):
            continue
        texts[e.name] = e.render(plan)
        if e.schedules is not None and plan.stand_in is not None:
            stand_ins[e.name] = plan.stand_in.line(e.schedules)
    return Exports(texts, {}, stand_ins)


def render_exports(ctx: ExportContext, stored: StoredTrials | None = None) -> dict[str, str]:
    """Exporter name -> its text, in the registry's order. An exporter whose framework cannot
    run the plan's pipeline schedule renders the best of `stored` it can run instead
    (`PlanChooser`)."""
    return _render(ctx, stored).texts


def prepare_exports(ctx: ExportContext, stored: StoredTrials | None = None) -> Exports:
    """Every export rendered, nothing written (`Exports.files` names where they go): a caller
    writing more files beside them (the report) writes them as one set
    (`ipu_tune.files.write_files`)."""
    return _render(ctx, stored)


def write_exports(ctx: ExportContext, out_dir: Path, root: str | Path | None = None,
                  stored: StoredTrials | None = None) -> Exports:
    """Render every export once and write each that has a file under `out_dir` (which must lie
    under `root` when given), as one set: all or none replaced (`ipu_tune.files.write_files`)."""
    rendered = _render(ctx, stored)
    paths = rendered.files(out_dir)
    write_files({paths[n]: rendered.texts[n] for n in paths}, "export path", root)
    return Exports(rendered.texts, paths, rendered.stand_ins)
