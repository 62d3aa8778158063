"""A `--config-dir` whose `defaults:` lists include one another in a circle.

Hydra expands a defaults list by recursion and has no check for a file that leads back to
itself (`experiment/e.yaml` with `defaults: [/experiment/e]`): it ends in a RecursionError
traceback. The lists of a folder's files are read as Hydra reads them and a circle is refused
with one line naming the file and the circle, before Hydra composes anything.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ipu_tune.errors import IpuTuneError

__all__ = ["check_cycles"]


def _entries(entries: Any, group: str) -> Iterator[str]:
    """The configs (`group/name`, from the folder's root) a defaults list of a file in `group`
    names: Hydra reads `name` and `sub: name` relative to the file's group, `/...` from the
    root; `override` and `optional` entries name a config too."""
    for entry in entries if isinstance(entries, list) else []:
        pairs = entry.items() if isinstance(entry, Mapping) else [(None, entry)]
        for key, value in pairs:
            names = value if isinstance(value, list) else [value]
            for name in names:
                if not isinstance(name, str) or name == "_self_":
                    continue
                if key is None:
                    yield _resolve(name, group)
                    continue
                sub = str(key).replace("override ", "").replace("optional ", "").strip()
                yield _resolve(f"{sub.partition('@')[0]}/{name}", group)


def _resolve(name: str, group: str) -> str:
    if name.startswith("/"):
        return name.lstrip("/")
    return f"{group}/{name}" if group else name


def check_cycles(root: Path, files: Mapping[Path, Any]) -> None:
    """Refuse a circle of `defaults:` among `files` (path -> data read) of the folder `root`."""
    names = {p.relative_to(root).with_suffix("").as_posix(): p for p in files
             if p.suffix == ".yaml"}
    edges: dict[str, list[str]] = {}
    for name, path in names.items():
        data = files[path]
        entries = data.get("defaults") if isinstance(data, Mapping) else None
        group = name.rpartition("/")[0]
        edges[name] = [t for t in _entries(entries, group) if t in names]
    done: set[str] = set()
    for start in sorted(edges):
        if start in done:
            continue
        # Depth first without recursion (a folder holds up to 2,000 files): `trail` is the
        # path from `start`, each with the targets still to visit.
        trail: list[tuple[str, list[str]]] = [(start, list(edges[start]))]
        on_trail = {start}
        while trail:
            name, todo = trail[-1]
            if not todo:
                trail.pop()
                on_trail.discard(name)
                done.add(name)
                continue
            nxt = todo.pop(0)
            if nxt in on_trail:
                visited = [n for n, _ in trail]
                circle = [*visited[visited.index(nxt):], nxt]
                raise IpuTuneError(
                    f"config file {str(names[nxt])!r}: defaults: {' -> '.join(circle)} leads "
                    "back to itself (Hydra would include it without end); allowed: a defaults "
                    "list that does not lead back to its own file")
            if nxt not in done:
                trail.append((nxt, list(edges[nxt])))
                on_trail.add(nxt)
