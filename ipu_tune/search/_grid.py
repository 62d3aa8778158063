"""The brute-force enumeration of a `Codec`'s space: every parameter dict and their count."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from ipu_tune.errors import IpuTuneError
from ipu_tune.search._space import KnobSpec
from ipu_tune.search._splits import cut_param


class Codec(Protocol):
    """What the enumeration reads of `ipu_tune.search._codec.Codec` (which imports this)."""

    STRUCTURE_KEYS: tuple[str, str, str]
    knobs: dict[str, KnobSpec]
    conditional: dict[str, KnobSpec]
    r_options: tuple[int, ...]
    split_search: KnobSpec | None
    schedule_spec: KnobSpec | None
    rts_spec: KnobSpec | None
    cut_step: int

    def cut_high(self) -> int: ...
    def stages_of(self, replicas: int) -> int: ...
    def running(self, params: Mapping[str, Any]) -> list[str]: ...


__all__ = ["grid", "grid_size", "spec_values"]


def spec_values(spec: KnobSpec) -> list[Any]:
    """Every value of a spec, in order (a float range needs a step)."""
    if not spec.is_range:
        return list(spec.choices)
    assert spec.low is not None and spec.high is not None
    if spec.kind == "int" and not spec.log:
        return list(range(int(spec.low), int(spec.high) + 1, int(spec.step or 1)))
    if spec.kind == "int":
        return list(range(int(spec.low), int(spec.high) + 1))
    if spec.step is None:
        raise IpuTuneError(f"{spec.key}: a float range needs a step to be enumerated")
    count = math.floor((spec.high - spec.low) / spec.step + 1e-9) + 1
    return [round(spec.low + i * spec.step, 12) for i in range(count)]

def grid(codec: Codec, distinct_splits: bool = True) -> Iterator[dict[str, Any]]:
    """Every parameter dict of the space (brute force). With `distinct_splits`, cut
    permutations (which decode to the same split) are drawn once, in sorted order."""
    r_param, schedule_key, rts_key = codec.STRUCTURE_KEYS
    keys = list(codec.knobs)
    values = [spec_values(codec.knobs[k]) for k in keys]
    cuts = list(range(1, codec.cut_high() + 1, codec.cut_step))
    structures: list[dict[str, Any]] = []
    for r in codec.r_options:
        stages = codec.stages_of(r)
        head = {r_param: r} if len(codec.r_options) > 1 else {}
        cut_sets: Iterable[tuple[int, ...]] = [()]
        if codec.split_search is not None and stages > 1:
            cut_sets = (itertools.combinations_with_replacement(cuts, stages - 1)
                        if distinct_splits else itertools.product(cuts, repeat=stages - 1))
        scheds: list[Any] = [None]
        if codec.schedule_spec is not None and stages > 1:
            scheds = spec_values(codec.schedule_spec)
        rtss = spec_values(codec.rts_spec) if codec.rts_spec and r >= 2 else [None]
        for cs in cut_sets:
            for sched in scheds:
                for rts in rtss:
                    st = dict(head)
                    st.update({cut_param(i, stages): c for i, c in enumerate(cs, start=1)})
                    if sched is not None:
                        st[schedule_key] = sched
                    if rts is not None:
                        st[rts_key] = rts
                    structures.append(st)
    for combo in itertools.product(*values):
        simple = dict(zip(keys, combo, strict=True))
        for st in structures:
            params = {**simple, **st}
            running = codec.running(params)
            for more in itertools.product(*(spec_values(codec.conditional[k])
                                            for k in running)):
                yield {**params, **dict(zip(running, more, strict=True))}

def grid_size(codec: Codec, distinct_splits: bool = True) -> int:
    """How many parameter dicts `grid` yields."""
    if codec.conditional:  # how many values they take depends on the plan: counted
        return sum(1 for _ in grid(codec, distinct_splits))
    n = 1
    for spec in codec.knobs.values():
        n *= len(spec_values(spec))
    structures = 0
    cuts = len(range(1, codec.cut_high() + 1, codec.cut_step))
    for r in codec.r_options:
        stages = codec.stages_of(r)
        k = 1
        if codec.split_search is not None and stages > 1:
            k = (math.comb(cuts + stages - 2, stages - 1) if distinct_splits
                 else cuts ** (stages - 1))
        if codec.schedule_spec is not None and stages > 1:
            k *= len(spec_values(codec.schedule_spec))
        if codec.rts_spec is not None and r >= 2:
            k *= len(spec_values(codec.rts_spec))
        structures += k
    return n * structures
