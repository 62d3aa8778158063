"""Render every export of a best plan once and write those with a file beside best.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ipu_tune.storage import atomic_write

from ._context import ExportContext
from ._registry import EXPORTERS

__all__ = ["Exports", "render_exports", "write_exports"]


@dataclass(frozen=True)
class Exports:
    """The rendered texts (exporter name -> text) and the files written (name -> path)."""

    texts: dict[str, str]
    paths: dict[str, Path]


def render_exports(ctx: ExportContext) -> dict[str, str]:
    """Exporter name -> its text, in the registry's order."""
    return {e.name: e.render(ctx) for e in EXPORTERS if e.applies(ctx)}


def write_exports(ctx: ExportContext, out_dir: Path,
                  root: str | Path | None = None) -> Exports:
    """Render every export once and write each that has a file under `out_dir` (which must lie
    under `root` when given: `ipu_tune.storage.atomic_write`)."""
    texts = render_exports(ctx)
    paths = {e.name: atomic_write(out_dir / e.file_name, texts[e.name], root)
             for e in EXPORTERS if e.file_name is not None and e.name in texts}
    return Exports(texts, paths)
