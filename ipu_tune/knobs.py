"""The plan knobs: one declaration each, from which everything else about a knob derives.

A knob is one setting of the execution plan (README, "The config schema"). Its entry below
says where it lives in the config (`key`), its `ExecutionPlan` field, its type, allowed values,
bounds and default, its results-store column and table header, its label and unit in plan
lines, whether it counts as a change for the `changes` objective, and how the search draws it.
The config schema's `workload`/`plan` sections and `ExecutionPlan` are generated from this
table; the config checks and limits, the search-space checks and codec, the change count, the
results store, the report table, the exports' context, the run summary, `evaluate`'s output
and the sweep comparison all read it. Adding a knob is one entry here plus its physics in the
simulator (tests/config/test_throwaway_knob.py adds one and follows it everywhere).

This module imports nothing of ipu_tune but `ipu_tune._needs` (what a knob may need, which
imports nothing): every layer may read it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import cache
from operator import attrgetter
from typing import Any

from ipu_tune._needs import GENERATED, INPUT_KIND, NEEDS, PROFILE_KEYS, SYNTHETIC, ModelFacts, Need

__all__ = [
    "AMP_LOW",
    "DRAWS",
    "GENERATED",
    "INPUT_KIND",
    "KNOBS",
    "NEEDS",
    "PLAN_KNOBS",
    "SQL_TYPES",
    "SYNTHETIC",
    "WORKLOAD_KNOBS",
    "Knob",
    "ModelFacts",
    "Need",
    "checker",
    "describe",
    "get_key",
    "is_power_of_two",
    "knob",
    "knob_by_field",
    "moot_keys",
    "never_wrong",
    "pipeline_minimum",
    "rate_number",
    "rate_text",
    "set_key",
    "shown",
    "valid_io_tiles",
]

# How a knob is drawn by the search (`search_spaces/*.yaml` specs, `ipu_tune.search`):
# - categorical: choices; null in a space file draws `search_domain`
# - int / float: a range {low, high, step | log} (or choices)
# - replicas: powers of two dividing system.num_ipus (null) or choices
# - instances: powers of two (null: up to system.num_ipus) or choices, fitted to the drawn
#   replicas and the servers (at least one per server, at most one per replica)
# - splits: one cut per stage boundary ({step})
# - "": never searched (fixed by the user or a preset's `fixed:`)
DRAWS = ("categorical", "int", "float", "replicas", "instances", "splits", "")

# SQL column types of the results store (mapped to SQLAlchemy in `ipu_tune.storage`).
SQL_TYPES = ("str8", "str16", "int", "float", "bool", "json")


def is_power_of_two(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def valid_io_tiles(n: int) -> bool:
    # Poplar's numIOTiles: 0, or an even number 32..192 (seed guide 4.4.2).
    return n == 0 or (32 <= n <= 192 and n % 2 == 0)


def pipeline_minimum(training: bool, stages: int, schedule: str) -> tuple[str, int] | None:
    """PopTorch's compile-time rule of a pipelined program (graphcore/poptorch Compiler.cpp,
    PipelinedExecution): training needs gradient accumulation >= the stages, inference device
    iterations >= the stages. (the knob's key, its least value), or None where the rule does not
    apply: one stage, or sharded execution (one stage at a time)."""
    if stages < 2 or schedule == "sharded":
        return None
    return ("plan.gradient_accumulation" if training else "plan.device_iterations", stages)


_TRAINING = ("training",)


@dataclass(frozen=True)
class Knob:
    """One plan knob (see the module docstring)."""

    key: str  # dotted config key, e.g. plan.precision
    field: str  # ExecutionPlan field name
    type: type  # python type of one value (tuple: a list of `item`s)
    default: Any
    sql: str  # one of SQL_TYPES
    header: str  # column header of the results and report tables ("" = not shown)
    label: str  # label in the plan lines of the run summary and `evaluate` ("" = not shown)
    draw: str  # one of DRAWS
    domain: tuple[Any, ...] | None = None  # allowed values (None: a range from `low`)
    # Lowest allowed value of a number, inclusive (a float knob's 0 is exclusive: (0, high]).
    low: float = 0
    # Highest allowed value (inclusive): of a float range; of an integer, what the stores and
    # the hardware can hold (`ipu_tune.config.LIMITS` gives each bound's reason).
    high: float | None = None
    unit: str = ""  # unit printed after the value in plan lines ("" = none)
    # In the plan highlights of a sweep's comparison table: "always", "changed" (when not the
    # default) or "" (never).
    highlight: str = ""
    # Values drawn when a space file gives null (None: `domain`; () for splits and replicas,
    # whose domains follow from the model and system).
    search_domain: tuple[Any, ...] | None = None
    change: bool = True  # counts as one change for the `changes` objective
    # What the knob needs to have any effect (names of `NEEDS`); a plan without one of them
    # does not run the knob: it is moot there (`moot_keys`).
    needs: tuple[str, ...] = ()
    rule: str = ""  # an extra check: power_of_two | io_tiles
    item: builtins.type = str  # a list knob's item type (block names: str)
    quiet: bool = False  # plan lines leave it out at its default

    @property
    def column(self) -> str:
        """Results-store column (the key below its section, dots as underscores)."""
        return self.key.split(".", 1)[1].replace(".", "_")

    @property
    def natural(self) -> tuple[Any, ...] | None:
        """The values a null spec in a space file stands for (None: a range must be given)."""
        if self.draw in ("replicas", "instances", "splits"):
            return ()
        return self.search_domain if self.search_domain is not None else self.domain

    def text(self, value: Any) -> str:
        """The value as plan lines print it: floats short, lists as Python lists, then the unit."""
        if isinstance(value, float):
            shown_value = f"{value:g}"
        elif isinstance(value, list | tuple):
            shown_value = str(list(value))
        else:
            shown_value = str(value)
        return f"{shown_value} {self.unit}" if self.unit else shown_value

    def at_default(self, value: Any) -> bool:
        """Whether `value` is the default (a list knob's list as its tuple default)."""
        return (tuple(value) if self.type is tuple else value) == self.default

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` for this knob, in the words of `bad_value` (None: ok)."""
        return checker(self)(value)


@cache
def checker(k: Knob) -> Callable[[Any], str | None]:
    """`Knob.problem` with the knob's branch chosen and its message worded once (validation
    checks every knob on each `evaluate` call); `never_wrong` when every typed value is ok."""
    if k.rule == "power_of_two":
        return _power_of_two_problem
    if k.rule == "io_tiles":
        return _io_tiles_problem
    if k.type is float or (k.type is tuple and k.item is float):
        return _range_checker(k)
    if k.domain is not None and k.type is str:
        domain, allowed = k.domain, "allowed: " + ", ".join(k.domain)
        return lambda value: None if value in domain else allowed
    if k.type is int:
        low, below = k.low, f"must be >= {k.low:g}"
        return lambda value: below if value < low else None
    return never_wrong


def _range_checker(k: Knob) -> Callable[[Any], str | None]:
    """A float knob's range (low, or above 0, to high), of its value or each of its values."""
    low, upper = k.low, k.high if k.high is not None else float("inf")
    span = f"[{low:g}, {upper:g}]" if low > 0 else f"(0, {upper:g}]"

    def inside(v: float) -> bool:
        return (low <= v if low > 0 else v > 0) and v <= upper

    if k.type is float:
        outside = f"must be in {span}"
        return lambda value: None if inside(value) else outside
    each = f"each value must be in {span}"
    return lambda values: None if all(inside(v) for v in values) else each


def never_wrong(value: Any) -> str | None:
    """The `Knob.checker` of a knob whose every typed value is allowed."""
    return None


def _power_of_two_problem(value: Any) -> str | None:
    return None if is_power_of_two(value) else "must be a power of two (1, 2, 4, ...)"


def _io_tiles_problem(value: Any) -> str | None:
    return None if valid_io_tiles(value) else "allowed: 0 or an even number in 32..192"


_BOOL = (False, True)
AMP_LOW = 0.001  # the least available memory proportion (below)
_IO_TILE_CHOICES = (0, 32, 64, 128, 192)  # seed guide 4.4.2: powers of two, 192 the largest

WORKLOAD_KNOBS: tuple[Knob, ...] = (
    Knob("workload.mode", "mode", str, "train", "str16", "", "", "",
         domain=("train", "infer"), change=False),
    Knob("workload.micro_batch_size", "micro_batch_size", int, 64, "int", "micro-batch",
         "micro-batch", "int", low=1, high=2**16, highlight="always"),
    Knob("workload.optimizer", "optimizer", str, "adamw", "str16", "", "", "",
         domain=("sgd", "momentum", "adam", "adamw", "lamb"), change=False, needs=_TRAINING),
)

PLAN_KNOBS: tuple[Knob, ...] = (
    # "<input>.<model>" as in the seed tutorial
    Knob("plan.precision", "precision", str, "32.32", "str8", "precision", "precision",
         "categorical", domain=("32.32", "16.32", "16.16"), highlight="always"),
    Knob("plan.gradient_accumulation", "gradient_accumulation", int, 1, "int", "grad. acc.",
         "GA", "int", low=1, high=2**20, needs=_TRAINING, highlight="always"),
    Knob("plan.device_iterations", "device_iterations", int, 1, "int", "device it.", "DI",
         "int", low=1, high=2**20, highlight="always"),
    Knob("plan.replication_factor", "replication_factor", int, 1, "int", "replicas",
         "replicas", "replicas", low=1, high=1024, rule="power_of_two"),
    # block names beginning stages 2..N
    Knob("plan.pipeline.splits", "splits", tuple, (), "json", "pipeline splits", "splits",
         "splits"),
    Knob("plan.pipeline.schedule", "schedule", str, "grouped", "str16", "schedule",
         "schedule", "categorical", domain=("grouped", "interleaved", "sharded"),
         needs=("pipelined",)),
    # PopART's autoRecomputation: `auto` = PopTorch's default (Pipeline when pipelined, else
    # none; poptorch Compiler.cpp), none = NoRecompute, checkpoints = Pipeline (Standard for
    # one stage), every_block = the same plus a recomputationCheckpoint at every block.
    Knob("plan.recompute", "recompute", str, "auto", "str16", "recompute", "recompute",
         "categorical", domain=("auto", "none", "checkpoints", "every_block"),
         needs=_TRAINING, highlight="always"),
    # At least 0.1 % of tile memory (640 bytes a tile on a Mk2): a proportion nearer 0 (a
    # typo such as 1e-320) split a matmul into more serial passes than a number holds.
    Knob("plan.available_memory_proportion", "available_memory_proportion", float, 0.6,
         "float", "AMP", "AMP", "float", low=AMP_LOW, high=1.0, needs=("one_proportion",)),
    # One proportion per IPU of a replica, as Graphcore's configs give them (PopTorch
    # setAvailableMemoryProportion({"IPU0": ...}), optimum's `matmul_proportion` list); empty:
    # `available_memory_proportion` on every IPU. Fixed, never drawn: a search that draws the
    # proportion, or a stage count other than the list's, runs one proportion on every IPU
    # (pinned on the command line, the list pins the proportion too: SearchProblem).
    Knob("plan.available_memory_proportion_per_ipu", "available_memory_proportion_per_ipu",
         tuple, (), "json", "", "AMP per IPU", "", low=AMP_LOW, high=1.0, highlight="changed",
         item=float, quiet=True),
    Knob("plan.offload_optimizer_state", "offload_optimizer_state", bool, False, "bool",
         "offload opt.", "offload", "categorical", domain=_BOOL, needs=_TRAINING),
    Knob("plan.replicated_tensor_sharding", "replicated_tensor_sharding", bool, False, "bool",
         "RTS", "RTS", "categorical", domain=_BOOL, needs=("training", "replicated")),
    Knob("plan.prefetch_depth", "prefetch_depth", int, 1, "int", "prefetch", "prefetch", "int",
         low=1, high=1024, needs=("stream",)),
    Knob("plan.io_tiles", "io_tiles", int, 0, "int", "I/O tiles", "I/O tiles", "categorical",
         domain=_IO_TILE_CHOICES, rule="io_tiles"),
    # 8-bit I/O is for pixels (seed session)
    Knob("plan.eight_bit_io", "eight_bit_io", bool, False, "bool", "8-bit I/O", "8-bit I/O",
         "categorical", domain=_BOOL, needs=("pixels", "stream")),
    Knob("plan.async_dataloader", "async_dataloader", bool, False, "bool", "async loader",
         "async loader", "categorical", domain=_BOOL, needs=("loader",)),
    Knob("plan.dataloader_workers", "dataloader_workers", int, 1, "int", "workers",
         "loader workers", "int", low=1, high=1024, needs=("loader",)),
    # PopRun host instances (poprun --num-instances; seed guide 4.3.2): a power of two, a
    # multiple of system.hosts, dividing the replicas. Drawn from powers of two (`instances`
    # draw: null in a space file = 1..num_ipus), then fitted to the drawn replicas and servers.
    Knob("plan.host_instances", "host_instances", int, 1, "int", "instances", "instances",
         "instances", low=1, high=1024, rule="power_of_two", highlight="changed",
         needs=("loader",)),
    # The vocabulary's matmul (a language model's output head, tied or not) in this many serial
    # slices of its output channels (PopTorch `serializedMatMul` OutputChannels, PopART
    # `setSerializeMatMul`; optimum-graphcore's `embedding_serialization_factor`, which slices
    # the word embedding's lookup too): each slice's temporary is a share of the whole, each
    # pays its compute set, weight exchange and AMP fill (`_compute`).
    Knob("plan.embedding_serialization", "embedding_serialization", int, 1, "int",
         "emb. serial.", "embedding serialization", "int", low=1, high=64,
         needs=("vocabulary",)),
    # Precision of matmul/conv partial sums (PopTorch setPartialsType). An fp32 model's
    # arithmetic accumulates in fp32 whatever the type: it runs only with an fp16 model.
    Knob("plan.partials", "partials", str, "float", "str8", "partials", "partials",
         "categorical", domain=("float", "half"), needs=("half_model",)),
)

# Every knob, in schema order (workload first, as the store's columns).
KNOBS: tuple[Knob, ...] = WORKLOAD_KNOBS + PLAN_KNOBS
if any(set(k.needs) - NEEDS.keys() for k in KNOBS):
    raise ImportError("a knob's needs must be names of NEEDS")

_BY_KEY: Mapping[str, Knob] = {k.key: k for k in KNOBS}
_BY_FIELD: Mapping[str, Knob] = {k.field: k for k in KNOBS}


def knob(key: str) -> Knob:
    """The knob of a dotted config key (KeyError when there is none)."""
    return _BY_KEY[key]


def knob_by_field(name: str) -> Knob:
    """The knob of an `ExecutionPlan` field (KeyError when there is none)."""
    return _BY_FIELD[name]


@cache
def _getter(key: str) -> Callable[[Any], Any]:
    return attrgetter(key)  # follows the dots in C; built once per key


def get_key(node: Any, key: str) -> Any:
    """The value at dotted `key` of a config (``plan.pipeline.splits``)."""
    return _getter(key)(node)  # `evaluate` validates every knob per call


def set_key(node: Any, key: str, value: Any) -> None:
    """Set dotted `key` of a config (tuples are stored as the lists OmegaConf expects)."""
    *parents, leaf = key.split(".")
    for part in parents:
        node = getattr(node, part)
    setattr(node, leaf, list(value) if isinstance(value, tuple) else value)


def rate_number(samples_per_s: float) -> str:
    """A samples/s figure as every view prints it: thousands separated from 100 up, three
    significant digits below (2.68, not 3; 0.412, not 0: a plan that only just runs is still a
    result) and from 10**15 up (a floor of 1e300 samples/s is not printed in 400 digits)."""
    v = samples_per_s
    return f"{v:,.0f}" if 100 <= v < 1e15 else f"{v:.3g}"


def rate_text(samples_per_s: float) -> str:
    """`rate_number` with its unit."""
    return rate_number(samples_per_s) + " samples/s"


def moot_keys(plan: Any, model: ModelFacts | str | None = None,
              needs: Collection[str] | None = None) -> frozenset[str]:
    """Keys of the knobs a plan does not run: those lacking something they need (`NEEDS`).

    `plan` is a config (or any object with its dotted keys) or a mapping of dotted keys to
    values (a results row's knobs); a key it lacks counts as not known. `model` is the model
    profile's facts (`ModelProfile.facts`), or its input kind alone (``image``, ``tokens``,
    ``audio``); None: not known. What is not known never makes a knob moot. `needs`: judge
    only these (None: all)."""
    value = plan.get if isinstance(plan, Mapping) else _reader(plan)
    facts = model if isinstance(model, ModelFacts) else ModelFacts(input_kind=model)

    def known(key: str) -> Any:
        return facts.value(key) if key in PROFILE_KEYS else value(key)

    unmet = {name for name, need in NEEDS.items()
             if (needs is None or name in needs) and need.lacking(*map(known, need.keys))}
    return frozenset(k.key for k in KNOBS if unmet.intersection(k.needs))


def _reader(cfg: Any) -> Callable[[str], Any]:
    def value(key: str) -> Any:
        try:
            return get_key(cfg, key)
        except AttributeError:
            return None
    return value


def describe(cfg: Any, model: ModelFacts | str | None = None) -> str:
    """The plan line of a config (run summary, `evaluate`): every labelled knob the plan runs,
    in order (`moot_keys`: not an inference plan's knobs of training, nor with synthetic data
    those of the host's stream and pipeline, ...). `model`: the model profile's facts."""
    shown_knobs = []
    moot = moot_keys(cfg, model)
    for k in KNOBS:
        if k.key in moot:
            continue
        value = get_key(cfg, k.key)
        if k.label and not (k.quiet and k.at_default(value)):
            shown_knobs.append(f"{k.label} {k.text(value)}")
    return ", ".join(shown_knobs)


def shown(value: Any) -> str:
    """A knob value as tables and change lists print it (``[layer3.8]``, ``0.6``, ``16.16``)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(_text, value)) + "]"
    if isinstance(value, float):
        return f"{value:g}"
    return _text(value)


def _text(value: Any) -> str:
    # Python prints no integer of over 4300 decimal digits (a ValueError): hex has no limit.
    if isinstance(value, int) and value.bit_length() > 14_000:
        return hex(value)
    return str(value)
