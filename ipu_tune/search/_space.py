"""Search-space files (`search_spaces/<name>.yaml`): which plan knobs a preset searches.

File format (read with ``yaml.safe_load`` only: a space file can never instantiate anything)::

    description: one line saying what the preset is for       # optional
    knobs:                      # the searched knobs, by their dotted config key
      plan.precision:                                # null / {}: the knob's whole natural domain
      plan.gradient_accumulation: {low: 1, high: 64, log: true}   # int range (log scale)
      plan.available_memory_proportion: {low: 0.1, high: 1.0, step: 0.05}  # float range
      plan.io_tiles: {choices: [0, 32, 64, 128, 192]}              # explicit choices
      plan.replication_factor:                       # powers of two dividing system.num_ipus
      plan.host_instances:                           # powers of two, fitted to replicas/servers
      plan.pipeline.splits: {step: 1}                # one cut per stage boundary (block index)
      plan.partials: {modes: [infer]}                # searched only in these workload modes
    fixed:                      # values every trial of this preset uses (not searched)
      workload.mode: infer
    constraints:
      keep_global_batch: false  # true: micro-batch x GA x replicas stays the user's
      throughput_floor_ratio: null  # feasible only at >= this share of the reference plan

Knobs not listed keep the user's value (`cfg.plan` / `cfg.workload`); a knob the user pinned
by a Hydra override is never searched even when listed. Range specs take `low`, `high` and
optionally `step` or `log` (not both, as Optuna); `choices` takes a non-empty list; `modes`
(train, infer) searches the knob only when the trial's `workload.mode` is one of them. Knobs
with a natural domain (enums, booleans, `plan.replication_factor`, `plan.pipeline.splits`,
`plan.io_tiles`) accept null for the whole domain. Every problem raises `IpuTuneError` naming
the file and the key.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipu_tune.config import SPACES_DIR, EvalConfig, read_yaml
from ipu_tune.errors import IpuTuneError, bound_text, described, key_name
from ipu_tune.knobs import KNOBS as _ALL_KNOBS
from ipu_tune.knobs import Knob, get_key, is_power_of_two, knob, valid_io_tiles

__all__ = [
    "FIXABLE_KEYS",
    "KNOBS",
    "SPACES_DIR",
    "KnobSpec",
    "SearchSpace",
    "admit_user_value",
    "fit_instances",
    "fitted_to_user",
    "load_space",
    "micro_batch_spec",
    "parse_space",
    "power_of_two_divisors",
    "space_names",
]


_INT, _FLOAT, _CAT, _BOOL, _SPLITS, _REPL = "int", "float", "cat", "bool", "splits", "replicas"
_INST = "instances"


def _kind(k: Knob) -> str:
    if k.draw == "categorical":
        return _BOOL if k.type is bool else _CAT
    return {"int": _INT, "float": _FLOAT, "replicas": _REPL, "instances": _INST,
            "splits": _SPLITS}[k.draw]


# knob key -> (value type, natural domain or None when a range must be given, lowest value);
# derived from `ipu_tune.knobs` (the knobs a space file may search).
KNOBS: dict[str, tuple[str, tuple[Any, ...] | None, float]] = {
    k.key: (_kind(k), k.natural, k.low) for k in _ALL_KNOBS if k.draw
}

# Keys a space may fix: every knob plus workload keys that are not searched.
FIXABLE_KEYS = frozenset(k.key for k in _ALL_KNOBS)
_TOP_KEYS = ("description", "knobs", "fixed", "constraints")
_CONSTRAINT_KEYS = ("keep_global_batch", "throughput_floor_ratio")
_SPEC_KEYS = ("low", "high", "step", "log", "choices", "modes")
# Values of a stepped range: more are no search a budget of trials can cover.
_MAX_STEPS = 10**6
_MODES = ("train", "infer")


@dataclass(frozen=True)
class KnobSpec:
    """One searched knob: a range (`low`/`high`/`step`/`log`) or `choices`."""

    key: str
    kind: str  # int | float | cat | bool | splits | replicas | instances
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    # The workload modes in which it is searched; () for every mode.
    modes: tuple[str, ...] = ()

    def searched_in(self, mode: str) -> bool:
        return not self.modes or mode in self.modes

    @property
    def is_range(self) -> bool:
        return self.low is not None

    def allows(self, value: Any) -> bool:
        """Whether a draw of this knob can be `value` (pipeline cuts, replicas and instances:
        any value the plan rules accept; a range: low <= value <= high)."""
        if self.choices:
            return value in self.choices
        if self.is_range and isinstance(value, int | float) and not isinstance(value, bool):
            return (self.low is None or value >= self.low) and (
                self.high is None or value <= self.high)
        return self.kind in ("bool", "splits", "replicas", "instances")


@dataclass(frozen=True)
class SearchSpace:
    name: str
    source: str  # the file it came from, for messages
    knobs: Mapping[str, KnobSpec]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    keep_global_batch: bool = False
    throughput_floor_ratio: float | None = None
    description: str = ""
    # The mapping it was parsed from: a study keeps a space file's (`StudyMeta.files`), so that
    # the commands on a stored study never open a file its config names.
    document: Mapping[str, Any] = field(default_factory=dict, compare=False)


def space_names() -> list[str]:
    return sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))


def is_space_file(name_or_path: str | Path) -> bool:
    """Whether `search.space` names a file of the user's (not a preset of `search_spaces/`)."""
    return Path(name_or_path).suffix in (".yaml", ".yml")


def load_space(name_or_path: str | Path) -> SearchSpace:
    """A preset name of `search_spaces/` or a path to a space file (format: module docstring)."""
    path = Path(name_or_path)
    if not is_space_file(path):
        path = SPACES_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise IpuTuneError(
                f"search.space={str(name_or_path)!r}: no such space; allowed: "
                + ", ".join(space_names())
                + " (or a path to a .yaml file)"
            )
    data = read_yaml(path, "space file")
    return parse_space(data, source=str(path), name=path.stem)


def _fail(source: str, key: str, message: str) -> IpuTuneError:
    return IpuTuneError(f"space file {source!r}: {key}: {message}")


def _number(source: str, key: str, value: object, integer: bool) -> float:
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    kind = "an integer" if integer else "a number"
    try:  # float() of an integer past 1e308 overflows
        number = float(value) if ok and not isinstance(value, bool) else math.nan  # type: ignore[arg-type]
    except OverflowError:
        raise _fail(source, key, f"{described(value)}: past 1e308; allowed: {kind} within "
                    "+-1e308") from None
    if not math.isfinite(number):
        raise _fail(source, key, f"{described(value)} is not {kind}")
    return number


def _check_choice(source: str, key: str, kind: str, domain: tuple[Any, ...] | None,
                  low: float, value: Any) -> None:
    where, got = f"knobs.{key}.choices", described(value)
    if kind in (_CAT, _BOOL) and domain:
        if knob(key).rule == "io_tiles":
            if isinstance(value, bool) or not isinstance(value, int) or not valid_io_tiles(value):
                raise _fail(source, where, f"{got}: allowed 0 or an even number in 32..192")
        elif value not in domain or isinstance(value, bool) != isinstance(domain[0], bool):
            raise _fail(source, where, f"{got}: allowed " + ", ".join(map(str, domain)))
    elif kind in (_REPL, _INST):
        if isinstance(value, bool) or not isinstance(value, int) or not is_power_of_two(value):
            raise _fail(source, where, f"{got}: must be a power of two")
    else:
        number = _number(source, where, value, integer=kind == _INT)
        if number < low or (kind == _FLOAT and number <= 0):
            raise _fail(source, where, f"{got}: must be > 0" if kind == _FLOAT
                        else f"{got}: must be >= {bound_text(low)}")


def _parse_choices(source: str, key: str, spec: Mapping[str, Any]) -> KnobSpec:
    """A knob spec given as `{choices: [...]}`."""
    kind, domain, lowest = KNOBS[key]
    if set(spec) - {"choices"}:
        raise _fail(source, f"knobs.{key}", "give either choices or a range, not both")
    choices = spec["choices"]
    if not isinstance(choices, list) or not choices:
        raise _fail(source, f"knobs.{key}.choices", "must be a non-empty list")
    if knob(key).type is str:
        # An unquoted 16.16 reads as a float in YAML; take it as the string it spells.
        choices = [str(v) if isinstance(v, float) else v for v in choices]
    for value in choices:
        _check_choice(source, key, kind, domain, lowest, value)
    if len(set(map(repr, choices))) != len(choices):
        raise _fail(source, f"knobs.{key}.choices", "duplicates")
    return KnobSpec(key, kind, choices=tuple(choices))


def _parse_knob(source: str, key: str, spec: object) -> KnobSpec:
    """One knob's spec, its `modes` (if any) apart from the rest."""
    if key not in KNOBS:  # first: every later message names the key, then a known knob
        raise _fail(source, f"knobs.{key_name(key)}", "unknown knob; allowed: "
                    + ", ".join(KNOBS))
    if isinstance(spec, Mapping) and "modes" in spec:
        modes = _parse_modes(source, key, spec["modes"])
        rest = {k: v for k, v in spec.items() if k != "modes"}
        return dataclasses.replace(_parse_domain(source, key, rest), modes=modes)
    return _parse_domain(source, key, spec)


def _parse_modes(source: str, key: str, modes: object) -> tuple[str, ...]:
    if (not isinstance(modes, list) or not modes or len(set(map(repr, modes))) != len(modes)
            or any(m not in _MODES for m in modes)):
        raise _fail(source, f"knobs.{key}.modes", f"{described(modes)}: a list of distinct "
                    "modes of " + ", ".join(_MODES))
    return tuple(modes)


def _parse_domain(source: str, key: str, spec: object) -> KnobSpec:
    kind, domain, lowest = KNOBS[key]
    if spec is None or spec == {}:
        if domain is None:
            raise _fail(source, f"knobs.{key}", "needs a range {low, high} or choices")
        return KnobSpec(key, kind, choices=tuple(domain))
    if not isinstance(spec, Mapping):
        raise _fail(source, f"knobs.{key}", f"expected a mapping, got {described(spec)}")
    unknown = [k for k in spec if k not in _SPEC_KEYS]
    if unknown:
        raise _fail(source, f"knobs.{key}.{key_name(unknown[0])}",
                    "unknown; allowed: " + ", ".join(_SPEC_KEYS))
    if kind == _SPLITS:
        if set(spec) - {"step"}:
            raise _fail(source, f"knobs.{key}", "takes only `step` (blocks between cuts)")
        cut_step = _number(source, f"knobs.{key}.step", spec["step"], integer=True)
        if cut_step < 1:
            raise _fail(source, f"knobs.{key}.step", f"{int(cut_step)}: must be >= 1")
        return KnobSpec(key, kind, step=cut_step)
    if "choices" in spec:
        return _parse_choices(source, key, spec)
    if kind not in (_INT, _FLOAT):
        raise _fail(source, f"knobs.{key}", "takes choices (or null for all), not a range")
    for needed in ("low", "high"):
        if needed not in spec:
            raise _fail(source, f"knobs.{key}.{needed}", "missing")
    integer = kind == _INT
    low = _number(source, f"knobs.{key}.low", spec["low"], integer)
    high = _number(source, f"knobs.{key}.high", spec["high"], integer)
    if low > high:
        raise _fail(source, f"knobs.{key}", f"low={spec['low']!r} > high={spec['high']!r}")
    if low < lowest or (kind == _FLOAT and low <= 0):
        raise _fail(source, f"knobs.{key}.low", f"{spec['low']!r}: must be "
                    + ("> 0" if kind == _FLOAT else f">= {bound_text(lowest)}"))
    upper = knob(key).high
    if upper is not None and high > upper:
        bound = bound_text(int(upper) if integer else upper)
        raise _fail(source, f"knobs.{key}.high", f"{spec['high']!r}: must be <= {bound}")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise _fail(source, f"knobs.{key}.log", f"{described(log)}: must be true or false")
    step: float | None = None
    if "step" in spec:
        step = _number(source, f"knobs.{key}.step", spec["step"], integer)
        if step <= 0:
            raise _fail(source, f"knobs.{key}.step", f"{spec['step']!r}: must be > 0")
        if log:
            raise _fail(source, f"knobs.{key}", "step and log cannot be combined")
        if (high - low) / step > _MAX_STEPS:  # Optuna's Decimal arithmetic fails past 10^28
            raise _fail(source, f"knobs.{key}.step", f"{spec['step']!r}: more than "
                        f"{_MAX_STEPS:,} steps from low to high; allowed: a step >= "
                        f"(high - low) / {_MAX_STEPS:,}")
    return KnobSpec(key, kind, low=low, high=high, step=step, log=log)


def parse_space(data: object, source: str = "<mapping>", name: str = "custom") -> SearchSpace:
    """Check a loaded space document and return it typed (see the module docstring)."""
    if data is None:
        raise IpuTuneError(f"space file {source!r}: empty; expected a mapping with `knobs:`")
    if not isinstance(data, Mapping):
        raise IpuTuneError(
            f"space file {source!r}: expected a mapping with `knobs:`, got {type(data).__name__}"
        )
    for key in data:
        if key not in _TOP_KEYS:
            raise _fail(source, key_name(key), "unknown key; allowed: " + ", ".join(_TOP_KEYS))
    knobs_in = data.get("knobs")
    if not isinstance(knobs_in, Mapping) or not knobs_in:
        raise _fail(source, "knobs", "must be a non-empty mapping of knob -> spec")
    knobs = {str(k): _parse_knob(source, str(k), v) for k, v in knobs_in.items()}

    fixed_in = data.get("fixed") or {}
    if not isinstance(fixed_in, Mapping):
        raise _fail(source, "fixed", f"expected a mapping, got {described(fixed_in)}")
    for key in fixed_in:
        if key not in FIXABLE_KEYS:
            raise _fail(source, f"fixed.{key_name(key)}", "unknown key; allowed: "
                        + ", ".join(sorted(FIXABLE_KEYS)))
        if key in knobs:
            raise _fail(source, f"fixed.{key}", "is also a searched knob")

    cons = data.get("constraints") or {}
    if not isinstance(cons, Mapping):
        raise _fail(source, "constraints", f"expected a mapping, got {described(cons)}")
    for key in cons:
        if key not in _CONSTRAINT_KEYS:
            raise _fail(source, f"constraints.{key_name(key)}", "unknown; allowed: "
                        + ", ".join(_CONSTRAINT_KEYS))
    keep = cons.get("keep_global_batch", False)
    if not isinstance(keep, bool):
        raise _fail(source, "constraints.keep_global_batch",
                    f"{described(keep)}: must be true or false")
    ratio = cons.get("throughput_floor_ratio")
    if ratio is not None:
        ratio = _number(source, "constraints.throughput_floor_ratio", ratio, integer=False)
        if not 0 < ratio <= 1:
            raise _fail(source, "constraints.throughput_floor_ratio",
                        f"{ratio!r}: must be in (0, 1]")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise _fail(source, "description", "must be a string")
    return SearchSpace(
        name=name,
        source=source,
        knobs=knobs,
        fixed=dict(fixed_in),
        keep_global_batch=keep,
        throughput_floor_ratio=ratio,
        description=description,
        document=json.loads(json.dumps(data, default=str)),  # as a study stores it
    )


def micro_batch_spec(spec: KnobSpec, user_mb: int, target: int | None) -> KnobSpec:
    """The micro-batch as a memory knob: never above the user's value (a larger one changes
    the training asked for); with a fixed global batch, only the divisors of it."""
    high = user_mb if spec.high is None else min(int(spec.high), user_mb)
    low = min(int(spec.low or 1), high)
    values = [v for v in (spec.choices or range(low, high + 1)) if v <= user_mb]
    if target is not None:
        values = [v for v in values if target % v == 0]
    if target is not None or spec.choices or low == high:
        return dataclasses.replace(spec, low=None, high=None, step=None, log=False,
                                   choices=tuple(values or [user_mb]))
    return dataclasses.replace(spec, low=low, high=high)


def fitted_to_user(knobs: Mapping[str, KnobSpec], user: EvalConfig, target: int | None,
                   micro_batch_key: str) -> dict[str, KnobSpec]:
    """The searched knobs around the user's plan: the micro-batch at or below the user's
    (`micro_batch_spec`), every other integer range widened to hold the user's value."""
    mb = user.workload.micro_batch_size
    return {key: micro_batch_spec(spec, mb, target) if key == micro_batch_key
            else admit_user_value(spec, get_key(user, key)) for key, spec in knobs.items()}


def admit_user_value(spec: KnobSpec, value: Any) -> KnobSpec:
    """An integer range widened to hold the user's own value (gradient accumulation 512 from an
    `ipu_config.json` against a preset's 1..64): the search starts from the user's plan and may
    keep it, never only move away from it. Choices and float grids stay as written."""
    if spec.kind != "int" or not spec.is_range or spec.step not in (None, 1):
        return spec
    if not isinstance(value, int) or isinstance(value, bool):
        return spec
    low = value if spec.low is None else min(int(spec.low), value)
    high = value if spec.high is None else max(int(spec.high), value)
    return dataclasses.replace(spec, low=low, high=high)


def power_of_two_divisors(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0]


def fit_instances(drawn: int, replicas: int, hosts: int) -> int:
    """PopRun instances as drawn, fitted to the plan: at most one per replica (so a power of
    two dividing the replicas) and spread evenly over the servers (below `hosts`, the
    simulator runs one per server)."""
    value = min(drawn, replicas)
    if value > hosts and value % hosts:
        value = 1 << (hosts.bit_length() - 1)
    return value
