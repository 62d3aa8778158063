"""Read an optimum-graphcore `ipu_config.json` as a starting plan (`plan.from_ipu_config`).

The file is checked against `IPUConfig.__init__`'s fields and types (`IPU_CONFIG_FIELDS`):
an unknown key or a value of the wrong type ends with one line naming the key, the value and
what is allowed. The fields that have a plan knob become the plan's values, by the mapping of
`_ipu_config` read backwards; the others (seed, cache folder, serialisation of embeddings and
projections, parallelize kwargs, the other mode's fields) change nothing ipu-tune simulates:
they ride in the config (`plan.ipu_config_carried`) to the exported `ipu_config.json`
unchanged, and the run names them in one line at its start (`ipu_config_note`), as
`evaluate` does before its figures (`ipu_config_unsimulated`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ipu_tune.case import build_case
from ipu_tune.config import (
    LIMITS,
    EvalConfig,
    at_one_proportion_if_moved,
    check_pinned_layout,
    parse_json,
    read_text,
    validate,
)
from ipu_tune.errors import IpuTuneError, bad_value, shown
from ipu_tune.exports._ipu_config import IPU_CONFIG_FIELDS, optimum_layers, plan_fields
from ipu_tune.models import ModelProfile

__all__ = ["apply_ipu_config", "carried_from_ipu_config", "ipu_config_fields",
           "ipu_config_note", "plan_values_from_ipu_config", "read_ipu_config"]

T = TypeVar("T", bound=EvalConfig)
_RTS = "plan.replicated_tensor_sharding"

KEY = "plan.from_ipu_config"
# Keys `IPUConfig.to_dict()` / `save_pretrained` add, and one `IPUConfig.__init__` pops:
# present in files on the Hub, meaning nothing for the plan.
_IGNORED = frozenset({"optimum_version", "transformers_version",
                      "execute_encoder_on_cpu_for_generation"})  # fmt: skip
# Keys `IPUConfig.__init__` (0.7.1, L387-393) pops as deprecated, with a warning, whatever their
# value: carried into the export as the file gave them (optimum reads them alike) and named
# so in the run's first line, never dropped unsaid.
DEPRECATED = frozenset({"sharded_execution_for_inference", "enable_half_first_order_momentum"})


def _matches(value: Any, hint: str) -> bool:
    """Does a JSON value fit one of IPUConfig's annotations? (bool is not an int here.)"""
    hint = hint.replace(" ", "")
    if hint.startswith("Optional[") and hint.endswith("]"):
        return value is None or _matches(value, hint[9:-1])
    if hint.startswith("Union[") and hint.endswith("]"):
        return any(_matches(value, h) for h in _split_args(hint[6:-1]))
    if hint.startswith("List[") and hint.endswith("]"):
        return isinstance(value, list) and all(_matches(v, hint[5:-1]) for v in value)
    if hint.startswith("Dict["):
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    simple: dict[str, Any] = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "Any": lambda v: True,
    }
    return bool(simple[hint](value))


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments of a typing subscript."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _where(path: str | Path) -> str:
    """How an error starts: the key and the path it was given (`plan.from_ipu_config='a.json'`),
    then the file's field (`replication_factor=0: ...`)."""
    return f"{KEY}={shown(str(path))}"


def read_ipu_config(path: str | Path) -> dict[str, Any]:
    """The checked contents of an `ipu_config.json` (a file or the folder holding one)."""
    where = _where(path)
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "ipu_config.json"
    text = read_text(file, "ipu_config.json", KEY)
    try:
        data = parse_json(text)
    except ValueError as exc:
        text = " ".join(str(exc).split())
        raise bad_value(KEY, str(path), f"a readable ipu_config.json ({text})") from None
    if not isinstance(data, dict):
        raise bad_value(KEY, str(path), "a JSON object of IPUConfig fields")
    for key, value in data.items():
        if key in _IGNORED or key in DEPRECATED:
            continue
        hint = IPU_CONFIG_FIELDS.get(key)
        if hint is None:
            allowed = ", ".join(IPU_CONFIG_FIELDS)
            raise IpuTuneError(f"{where}: {key}={shown(value)}: unknown key; IPUConfig's fields "
                               f"(optimum-graphcore 0.7.1): {allowed}")
        if not _matches(value, hint):
            raise IpuTuneError(f"{where}: {key}={shown(value)}: must be {hint}")
        _check_range(where, key, value)
    checked = {k: v for k, v in data.items() if k not in _IGNORED}
    for mode in ("train", "infer"):  # optimum checks both modes whichever one runs
        _check_lengths(where, _managed(checked, mode))
        _check_serialized(where, checked, mode)
    if checked.get("output_mode", "final") not in _OUTPUT_MODES:
        raise IpuTuneError(f"{where}: output_mode={shown(checked['output_mode'])}: must be one "
                           f"of {', '.join(_OUTPUT_MODES)}")
    return checked


_OUTPUT_MODES = ("all", "sum", "final", "default")  # IPUConfig's `_output_mode_validator`


def _check_serialized(where: str, data: Mapping[str, Any], mode: str) -> None:
    """`IPUConfig`'s rules (0.7.1) for a layer split over IPUs: splits per IPU >= 0, at least
    one, on consecutive IPUs, one per IPU of a replica; a factor or splits, not both."""
    prefix = "" if mode == "train" else "inference_"
    ipus_key, ipus = _managed(data, mode)["ipus_per_replica"]
    for layer in ("embedding", "projection"):
        key = f"{prefix}serialized_{layer}_splits_per_ipu"
        factor = f"{prefix}{layer}_serialization_factor"
        splits = data.get(key)
        if splits is None:
            continue
        used = [i for i, n in enumerate(splits) if n]
        if any(n < 0 for n in splits) or not used or used != list(range(used[0], used[-1] + 1)):
            raise IpuTuneError(f"{where}: {key}={shown(splits)}: splits >= 0, at least one, "
                               "on consecutive IPUs")
        if len(splits) != ipus:
            raise IpuTuneError(f"{where}: {key}={shown(splits)}: must give one value per IPU, "
                               f"{ipus} ({ipus_key}={ipus})")
        if data.get(factor):
            raise IpuTuneError(f"{where}: {key}={shown(splits)}: only one of it and "
                               f"{factor}={shown(data[factor])} may be set (IPUConfig)")


# optimum-graphcore 0.7.1's floors (`IPUConfig.attribute_validators`): the value, or each
# element of a list, at least this. It reads an `ipus_per_replica` of 0 as unset; a file
# stating 0 IPUs is refused here rather than guessed at.
_FLOORS = {"layers_per_ipu": -1, "matmul_proportion": 0, "replication_factor": 1,
           "gradient_accumulation_steps": 1, "ipus_per_replica": 1,
           "embedding_serialization_factor": 1, "projection_serialization_factor": 1,
           "device_iterations": 1}  # fmt: skip
# Poplar's availableMemoryProportion is a share of each tile's memory: at most all of it. The
# counts are at most what the config's own keys take (`LIMITS`: IPUs, replicas, accumulation,
# device iterations): beyond, a file would have this import build lists of a trillion IPUs.
_CEILINGS = {"matmul_proportion": 1, "ipus_per_replica": LIMITS["system.num_ipus"],
             "replication_factor": LIMITS["plan.replication_factor"],
             "gradient_accumulation_steps": LIMITS["plan.gradient_accumulation"],
             "device_iterations": LIMITS["plan.device_iterations"]}


def _check_range(where: str, key: str, value: Any) -> None:
    base = key.removeprefix("inference_")
    floor, ceiling = _FLOORS.get(base), _CEILINGS.get(base)
    values = value if isinstance(value, list) else [value]
    if value is None or (floor is None and ceiling is None):
        return
    if any(floor is not None and v < floor for v in values) or any(
            ceiling is not None and v > ceiling for v in values):
        what = "every element must be" if isinstance(value, list) else "must be"
        span = f">= {floor}" if ceiling is None else f"in {floor}..{ceiling}"
        raise IpuTuneError(f"{where}: {key}={shown(value)}: {what} {span}")


def _managed(data: Mapping[str, Any], mode: str) -> dict[str, tuple[str, Any]]:
    """`layers_per_ipu`, `ipus_per_replica` and `matmul_proportion` of a `mode` run, each with
    the field it came from, defaulted as `IPUConfig.__init__` (0.7.1) defaults them."""
    layers = data.get("layers_per_ipu") or [-1]
    ipus = data.get("ipus_per_replica") or len(layers)
    amp = data.get("matmul_proportion", 0.2)
    out = {"layers_per_ipu": ("layers_per_ipu", layers),
           "ipus_per_replica": ("ipus_per_replica" if data.get("ipus_per_replica")
                                else "len(layers_per_ipu)", ipus),
           "matmul_proportion": ("matmul_proportion", amp)}
    if mode == "train":
        return out
    if data.get("inference_layers_per_ipu"):
        out["layers_per_ipu"] = ("inference_layers_per_ipu", data["inference_layers_per_ipu"])
    layers = out["layers_per_ipu"][1]
    if data.get("inference_ipus_per_replica"):
        out["ipus_per_replica"] = ("inference_ipus_per_replica",
                                   data["inference_ipus_per_replica"])
    elif ipus == len(data.get("layers_per_ipu") or [-1]) or layers != [-1]:
        out["ipus_per_replica"] = (f"len({out['layers_per_ipu'][0]})", len(layers))
    if data.get("inference_matmul_proportion"):
        out["matmul_proportion"] = ("inference_matmul_proportion",
                                    data["inference_matmul_proportion"])
    elif isinstance(amp, list) and len(amp) != out["ipus_per_replica"][1]:
        out["matmul_proportion"] = ("matmul_proportion", 0.2)  # optimum's fallback
    return out


def _check_lengths(where: str, managed: Mapping[str, tuple[str, Any]]) -> None:
    """`IPUConfig._validate_ipu_config`: per-IPU lists as long as the IPUs of a replica."""
    ipus_key, ipus = managed["ipus_per_replica"]
    for name in ("matmul_proportion", "layers_per_ipu"):
        key, value = managed[name]
        if isinstance(value, list) and -1 not in value and len(value) != ipus:
            raise IpuTuneError(f"{where}: {key}={shown(value)}: must give one value per IPU, "
                               f"{ipus} ({ipus_key}={ipus})")


def _expand(layers: list[int], n_layers: int, ipus: int) -> list[int]:
    """`layers_per_ipu` with its -1 wildcards filled as optimum-graphcore 0.7.1 fills them
    (`modeling_utils._expand_layers_per_ipu_wildcard`: even shares, the rest on the last)."""
    if ipus == 1:
        return [n_layers]
    if layers in ([-1], [-1] * ipus):
        layers = [-1] * ipus
    wild = [i for i, v in enumerate(layers) if v == -1]
    if wild:
        share, rest = divmod(n_layers - sum(v for v in layers if v != -1), len(wild))
        layers = [share if v == -1 else v for v in layers]
        layers[wild[-1]] += rest
    return layers


def _splits(
    managed: Mapping[str, tuple[str, Any]], profile: ModelProfile, where: str
) -> tuple[str, ...]:
    key, raw = managed["layers_per_ipu"]
    ipus = managed["ipus_per_replica"][1]
    counts = optimum_layers(profile)
    # The entry at which each block that holds one begins: where a stage can begin.
    begins = {sum(counts[:b]): b for b in range(1, len(counts)) if counts[b]}
    total = sum(counts)
    layers = _expand(list(raw), total, int(ipus))
    if len(layers) != ipus or sum(layers) != total or min(layers) < 0:
        raise IpuTuneError(f"{where}: {key}={shown(raw)}: must place the {total} "
                           f"layers of {profile.name} on {ipus} IPUs (ipus_per_replica)")
    if any(n == 0 for n in layers[1:]):
        # optimum runs a classification or QA head alone on a last IPU of no layer; the
        # profile keeps such a head in the last layer's block, so no split can say that.
        raise IpuTuneError(f"{where}: {key}={shown(raw)}: every IPU after IPU0 needs a layer "
                           "(IPU0 may hold the embeddings alone; a last IPU holding only the "
                           "output head, which optimum-graphcore allows, is not simulated: "
                           "give it a layer)")  # fmt: skip
    done, splits = 0, list[str]()
    for n in layers[:-1]:
        done += n
        if done not in begins:  # inside a block optimum counts several entries of (a front end)
            raise IpuTuneError(
                f"{where}: {key}={shown(raw)}: gives IPU{len(splits) + 1} layers from entry "
                f"{done} of {total}, inside a block of {profile.name} that holds several "
                f"(as {_layers_text(counts)}); allowed: IPUs that begin where a block does")
        splits.append(profile.blocks[begins[done]])
    return tuple(splits)


def _layers_text(counts: list[int]) -> str:
    """The entries per block, where blocks hold more than one: `block 0: 8, then 1 each`."""
    many = [f"block {b}: {n}" for b, n in enumerate(counts) if n > 1]
    return ", ".join(many) + ", the others 1 or 0"


def _proportions(value: Any) -> tuple[float, tuple[float, ...]]:
    """The plan's one proportion and its per-IPU list: different per-IPU values are kept per
    IPU, the one proportion their mean (where a search draws one for every IPU); equal values,
    or one value, are the one proportion alone."""
    values = [float(v) for v in value] if isinstance(value, list) else [float(value)]
    mean = round(sum(values) / max(1, len(values)), 4)
    return mean, (tuple(values) if len(set(values)) > 1 else ())


def plan_values_from_ipu_config(
    data: Mapping[str, Any], profile: ModelProfile, mode: str, file: str | None = None
) -> dict[str, Any]:
    """The plan knobs (`ExecutionPlan` field names) an IPUConfig sets for a `mode` run; an
    error names `plan.from_ipu_config=file` (the key alone without `file`)."""
    prefix = "" if mode == "train" else "inference_"
    managed = _managed(data, mode)
    values: dict[str, Any] = {"splits": _splits(managed, profile,
                                                _where(file) if file else KEY)}
    # optimum-graphcore picks the strategy itself (ipu_configuration.py L615-619):
    # PipelinedExecution to train, ShardedExecution for inference.
    values["schedule"] = "grouped" if mode == "train" else "sharded"
    (values["available_memory_proportion"],
     values["available_memory_proportion_per_ipu"]) = _proportions(managed["matmul_proportion"][1])
    values["replication_factor"] = int(data.get(f"{prefix}replication_factor", 1))
    values["device_iterations"] = int(data.get(f"{prefix}device_iterations", 1))
    # Not an IPUConfig field: optimum-graphcore runs the model in fp16 unless told otherwise
    # (IPUTrainingArguments.fp32 defaults to False, then IPUTrainer calls model.half();
    # pipeline(..., fp16=True) by default).
    values["precision"] = "16.16"
    # IPUConfig's defaults where the file is silent: half partials, optimizer state on chip.
    values["partials"] = "half" if data.get("enable_half_partials", True) else "float"
    values["recompute"] = "every_block" if data.get("recompute_checkpoint_every_layer") else "auto"
    if mode == "train":
        values["gradient_accumulation"] = int(data.get("gradient_accumulation_steps", 1))
        values["offload_optimizer_state"] = bool(data.get("optimizer_state_offchip", False))
        # As the file gives it: with one replica optimum turns it off (`apply_ipu_config`).
        values["replicated_tensor_sharding"] = bool(data.get("replicated_tensor_sharding", False))
    return values


def ipu_config_fields(data: Mapping[str, Any], mode: str) -> dict[str, str]:
    """Plan key -> the file's field it was read from, for the fields with a bounded knob: an
    error in the plan then names what the user wrote (`replication_factor=8`), not the key
    the file set."""
    prefix = "" if mode == "train" else "inference_"
    managed = _managed(data, mode)
    fields = {"plan.available_memory_proportion": managed["matmul_proportion"][0],
              "plan.available_memory_proportion_per_ipu": managed["matmul_proportion"][0],
              "plan.pipeline.splits": managed["layers_per_ipu"][0],
              "plan.replication_factor": f"{prefix}replication_factor",
              "plan.device_iterations": f"{prefix}device_iterations"}
    if mode == "train":
        fields["plan.gradient_accumulation"] = "gradient_accumulation_steps"
    return fields


# The carried fields are stored with every trial's config: at most this much JSON text (a
# Hub ipu_config.json holds a few hundred bytes; the file itself may hold 1 MiB).
_MAX_CARRIED_BYTES = 16 << 10


def carried_from_ipu_config(data: Mapping[str, Any], mode: str, file: str) -> dict[str, Any]:
    """The checked file's fields a `mode` plan does not set (`plan_fields`), in the file's
    order and JSON types: what the export carries unchanged."""
    carried = {k: v for k, v in data.items() if k not in plan_fields(mode == "train")}
    size = len(json.dumps(carried))
    if size > _MAX_CARRIED_BYTES:
        largest = max(carried, key=lambda k: len(json.dumps(carried[k])))
        raise IpuTuneError(f"{_where(file)}: {largest}: the fields ipu-tune does not simulate "
                           f"hold {size} bytes of JSON; at most {_MAX_CARRIED_BYTES}")
    return carried


def ipu_config_unsimulated(cfg: EvalConfig) -> str | None:
    """The fields of the `plan.from_ipu_config` file the simulator ignores, in one line."""
    path, carried = cfg.plan.from_ipu_config, cfg.plan.ipu_config_carried or {}
    return f"{_where(path)}: not simulated: {_names(carried)}" if path and carried else None


def _names(carried: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} (deprecated: optimum-graphcore ignores it)" if k in DEPRECATED
                     else k for k in carried)


def ipu_config_note(cfg: EvalConfig) -> str | None:
    """One line naming the fields of the `plan.from_ipu_config` file the simulator ignores and
    where they go (None: no file, or nothing to say)."""
    from ipu_tune.exports._optimum import optimum_runs

    path, carried = cfg.plan.from_ipu_config, cfg.plan.ipu_config_carried or {}
    if not path:
        return None
    names = _names(carried)
    if optimum_runs(cfg.model):
        return (f"{_where(path)}: not simulated, carried into the export unchanged: {names}"
                if carried else None)
    head = f"{_where(path)}: not simulated: {names}; " if carried else f"{_where(path)}: "
    return head + ("no ipu_config.json or run_with_optimum.py for this model: optimum-graphcore "
                   "0.7.1 pipelines only the Transformers classes it registers (BERT, RoBERTa, "
                   "GPT-2, T5, ViT, ConvNeXt, wav2vec2, Whisper, ...: docs/huggingface.md)")


def apply_ipu_config(cfg: T, pinned: frozenset[str] = frozenset(), whole: bool = False) -> T:
    """`cfg` with the plan of its `plan.from_ipu_config` file (unchanged without one), checked
    as a search's starting plan (`whole`: as a plan to evaluate, filling the system). Keys
    the user set on the command line (`pinned`) keep their values."""
    path = cfg.plan.from_ipu_config
    if not path:
        return cfg
    from ipu_tune.knobs import knob_by_field
    from ipu_tune.models import profile_model

    data = read_ipu_config(path)
    profile = profile_model(cfg.model)
    values = plan_values_from_ipu_config(data, profile, cfg.workload.mode, str(path))
    out = copy.deepcopy(cfg)
    out.plan.ipu_config_carried = carried_from_ipu_config(data, cfg.workload.mode, str(path))
    for name, value in values.items():
        key = knob_by_field(name).key
        if key in pinned:
            continue
        *parents, last = key.split(".")
        node: Any = out
        for part in parents:
            node = getattr(node, part)
        setattr(node, last, list(value) if isinstance(value, tuple) else value)
    if out.plan.replication_factor == 1 and _RTS not in pinned:
        # optimum shards only across replicas: with one (the file's or the command line's) it
        # warns and turns sharding off (ipu_configuration.py L498, L612).
        out.plan.replicated_tensor_sharding = False
    at_one_proportion_if_moved(out, pinned)  # a pinned proportion or stage count wins
    # Checked here, where the file's field of each plan key is known (a value out of the
    # plan's range, or more replicas or stages than the system's IPUs).
    try:
        validate(out, check_layout=whole)
        check_pinned_layout(out, pinned)
        if whole:  # PopTorch's pipeline rule with a tied head's own stage
            build_case(out, profile)
    except IpuTuneError as exc:
        text = str(exc)
        for key, name in ipu_config_fields(data, cfg.workload.mode).items():
            if text.startswith(f"{key}=") and key not in pinned:
                unset = "" if name in data else "unset: IPUConfig's default; "
                raise IpuTuneError(f"{_where(path)}: {name} ({unset}sets {text})") from None
        raise
    return out
