"""How `Codec.decode` writes a config: a shallow copy of each section it changes, and each
knob set through its section, the path split once per knob (decoding is the local search's
inner loop)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, TypeVar

from ipu_tune.search._space import KnobSpec

__all__ = ["Setter", "copied", "setters"]

T = TypeVar("T")
# (dotted key, whether a float, getter of the section holding it, its last part)
Setter = tuple[str, bool, Callable[[Any], Any], str]


def copied(obj: T) -> T:
    """`copy.copy` of a config section (a plain dataclass: a new instance sharing the field
    values), without `copy`'s dispatch through `__reduce_ex__`."""
    new = type(obj).__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def setters(knobs: Mapping[str, KnobSpec]) -> list[Setter]:
    """What setting each knob as `ipu_tune.knobs.set_key` does needs, found once."""
    out: list[Setter] = []
    for key, spec in knobs.items():
        section, _, leaf = key.rpartition(".")
        out.append((key, spec.kind == "float", attrgetter(section) if section else _itself,
                    leaf))
    return out


def _itself(node: Any) -> Any:
    return node
