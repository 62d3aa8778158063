"""Numbers that must be real: every float of a config finite, positive where a rate or a time
is meant, and paths free of control characters.

`inf` and `nan` pass every `<`/`>` range check (`nan < 0` is False), so a NaN preprocessing
time or an infinite network rate would reach the simulator and the stored study. The float
fields are found once per schema (a tuple of getters); a check costs a few microseconds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Union, get_args, get_origin, get_type_hints

from ipu_tune.errors import IpuTuneError, bad_value, bound_text

__all__ = ["check_numbers"]

# Floats that must be > 0 when set (a rate, a time limit); the others must be finite.
_POSITIVE = frozenset({"study.timeout_s", "system.host.network_bytes_per_s"})
# Finite floats can still be typos far beyond any machine (1e300 bytes/s is a network of no
# cost, 1e-300 one that moves a sample in 10^290 years; an hour per sample, no training): the
# lowest and highest each may be.
# - network_bytes_per_s: 1e6 (1 MB/s, slower than a 10 Mb/s Ethernet: no link an IPU server
#   is fed by) to 1e13 (10 TB/s, 200 times a 400 Gb/s host link);
# - preprocess_s_per_sample: 3600 s, an hour of host work for one sample.
_LOWEST = {"system.host.network_bytes_per_s": 1e6}
_HIGHEST = {"system.host.network_bytes_per_s": 1e13,
            "model.dataset.preprocess_s_per_sample": 3600.0}


def _float_paths(schema: type, prefix: str = "") -> list[str]:
    paths: list[str] = []
    hints = get_type_hints(schema)
    for f in dataclasses.fields(schema):
        hint = hints[f.name]
        if get_origin(hint) is Union:
            hint = next(a for a in get_args(hint) if a is not type(None))
        if hint is float:
            paths.append(prefix + f.name)
        elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
            paths.extend(_float_paths(hint, f"{prefix}{f.name}."))
    return paths


_GETTERS: dict[type, tuple[tuple[str, Callable[[Any], Any]], ...]] = {}


def _getters(schema: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    found = _GETTERS.get(schema)
    if found is None:
        found = _GETTERS[schema] = tuple((p, attrgetter(p)) for p in _float_paths(schema))
    return found


def check_numbers(cfg: Any) -> None:
    """Raise `IpuTuneError` naming the first float that is not a finite number (or not > 0
    for a rate or a time), or a results_dir with a control character."""
    for key, get in _getters(type(cfg)):
        value = get(cfg)
        if value is None:
            continue
        if type(value) is bool or not isinstance(value, int | float) or not math.isfinite(value):
            raise bad_value(key, value, "must be a finite number (not inf or nan)")
        if key in _POSITIVE and value <= 0:
            raise bad_value(key, value, "must be > 0")
        if value < _LOWEST.get(key, -math.inf):
            raise bad_value(key, value, f"must be >= {bound_text(_LOWEST[key])}")
        if value > _HIGHEST.get(key, math.inf):
            raise bad_value(key, value, f"must be <= {bound_text(_HIGHEST[key])}")
    results_dir = getattr(cfg, "results_dir", None)
    if isinstance(results_dir, str) and not results_dir.strip():  # would write into the cwd
        raise IpuTuneError(f"results_dir={results_dir!r}: empty; allowed: a folder (default "
                           "results, . for the current one)")
    if isinstance(results_dir, str) and any(ord(c) < 32 or ord(c) == 127 for c in results_dir):
        raise IpuTuneError(f"results_dir={results_dir!r}: control characters (a newline, ...) "
                           "are not allowed in a path")
