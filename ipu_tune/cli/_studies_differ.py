"""What tells a stored study from the others of the same model and system, for `studies`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ipu_tune.records import StudyMeta

__all__ = ["what_differs"]

_DIFFERS_SHOWN = 4


def what_differs(metas: Sequence[StudyMeta | None]) -> list[str]:
    """Per study, what tells it from the stored studies of the same model and system: the
    problem keys (search preset, sampler, starting plan, pinned keys, ...) whose values differ
    among them, as `key=value` of this study."""
    from ipu_tune.tuner import problem_fingerprint

    prints = [problem_fingerprint(m.config, m.pinned) if m and m.config else None
              for m in metas]
    out = []
    for meta, mine in zip(metas, prints, strict=True):
        same = [p for m, p in zip(metas, prints, strict=True) if p is not None and meta
                and m and (m.model, m.ipu, m.num_ipus) == (meta.model, meta.ipu, meta.num_ipus)]
        if mine is None or len(same) < 2:
            out.append("")
            continue
        keys = sorted((k for k in mine if k != "pinned" and not k.startswith(_FOLLOWS)
                       and any(p.get(k) != mine[k] for p in same)), key=_rank)
        shown = [f"{k.removesuffix('.name')}={_short(mine[k])}" for k in keys]
        more = f" (+{len(shown) - _DIFFERS_SHOWN} more)" if len(shown) > _DIFFERS_SHOWN else ""
        out.append(", ".join(shown[:_DIFFERS_SHOWN]) + more)
    return out


# Keys that follow from one shown before them (a sampler's parameters from its name, the
# search preset's space and objectives from its name).
_FOLLOWS = ("sampler.params.", "search.space", "search.objectives")
_FIRST = ("search.name", "sampler.name", "sampler.seed", "model.", "system.", "workload.")


def _rank(key: str) -> tuple[int, str]:
    return next((i for i, p in enumerate(_FIRST) if key.startswith(p)), len(_FIRST)), key


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return "-" if value is None else str(value)
