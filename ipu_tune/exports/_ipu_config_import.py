"""Read an optimum-graphcore `ipu_config.json` as a starting plan (`plan.from_ipu_config`).

The file is checked as `IPUConfig` checks it (`_ipu_config_read`). The fields that have a
plan knob become the plan's values, by the mapping of `_ipu_config` read backwards; the
others (seed, cache folder, serialisation of embeddings and projections, parallelize kwargs,
the other mode's fields) change nothing ipu-tune simulates: they ride in the config
(`plan.ipu_config_carried`) to the exported `ipu_config.json` unchanged, and the run names
them in one line at its start (`ipu_config_note`), as `evaluate` does before its figures
(`ipu_config_unsimulated`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from ipu_tune.case import build_case, validate_whole
from ipu_tune.config import (
    EvalConfig,
    at_one_proportion_if_moved,
    check_pinned_layout,
    validate,
)
from ipu_tune.errors import IpuTuneError, shown
from ipu_tune.exports._ipu_config import optimum_layers, plan_fields, serializes
from ipu_tune.exports._ipu_config_read import (
    DEPRECATED,
    KEY,
    file_key,
    managed_fields,
    read_ipu_config,
)
from ipu_tune.models import ModelProfile

__all__ = ["apply_ipu_config", "carried_from_ipu_config", "ipu_config_fields",
           "ipu_config_note", "plan_values_from_ipu_config", "read_ipu_config"]

T = TypeVar("T", bound=EvalConfig)
_RTS = "plan.replicated_tensor_sharding"


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
    managed = managed_fields(data, mode)
    values: dict[str, Any] = {"splits": _splits(managed, profile,
                                                file_key(file) if file else KEY)}
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
    # The vocabulary's slices on its IPU, of a model with a vocabulary head (`serializes`;
    # `serialized_embedding_splits_per_ipu`, a split over IPUs, is not simulated: carried).
    # The models read the training field in either mode (modeling_bert.py, modeling_gpt2.py).
    if serializes(profile):
        values["embedding_serialization"] = int(data.get("embedding_serialization_factor") or 1)
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
    managed = managed_fields(data, mode)
    fields = {"plan.available_memory_proportion": managed["matmul_proportion"][0],
              "plan.available_memory_proportion_per_ipu": managed["matmul_proportion"][0],
              "plan.pipeline.splits": managed["layers_per_ipu"][0],
              "plan.replication_factor": f"{prefix}replication_factor",
              "plan.device_iterations": f"{prefix}device_iterations"}
    fields["plan.embedding_serialization"] = "embedding_serialization_factor"
    if mode == "train":
        fields["plan.gradient_accumulation"] = "gradient_accumulation_steps"
    return fields


# The carried fields are stored with every trial's config: at most this much JSON text (a
# Hub ipu_config.json holds a few hundred bytes; the file itself may hold 1 MiB).
_MAX_CARRIED_BYTES = 16 << 10


def carried_from_ipu_config(data: Mapping[str, Any], mode: str, file: str,
                            profile: ModelProfile) -> dict[str, Any]:
    """The checked file's fields a `mode` plan of `profile`'s model does not set
    (`plan_fields`), in the file's order and JSON types: what the export carries unchanged."""
    sets = plan_fields(mode == "train", serializes(profile))
    carried = {k: v for k, v in data.items() if k not in sets}
    size = len(json.dumps(carried))
    if size > _MAX_CARRIED_BYTES:
        largest = max(carried, key=lambda k: len(json.dumps(carried[k])))
        raise IpuTuneError(f"{file_key(file)}: {largest}: the fields ipu-tune does not simulate "
                           f"hold {size} bytes of JSON; at most {_MAX_CARRIED_BYTES}")
    return carried


def ipu_config_unsimulated(cfg: EvalConfig) -> str | None:
    """The fields of the `plan.from_ipu_config` file the simulator ignores, in one line."""
    path, carried = cfg.plan.from_ipu_config, cfg.plan.ipu_config_carried or {}
    return f"{file_key(path)}: not simulated: {_names(carried)}" if path and carried else None


def _names(carried: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} (deprecated: optimum-graphcore ignores it)" if k in DEPRECATED
                     else k for k in carried)


def ipu_config_note(cfg: EvalConfig) -> str | None:
    """One line naming the fields of the `plan.from_ipu_config` file the simulator ignores and
    where they go (None: no file, or nothing to say)."""
    from ipu_tune.exports._optimum import optimum_note

    path, carried = cfg.plan.from_ipu_config, cfg.plan.ipu_config_carried or {}
    if not path:
        return None
    names = _names(carried)
    no_optimum = optimum_note(cfg.model)
    if no_optimum is None:
        return (f"{file_key(path)}: not simulated, carried into the export unchanged: {names}"
                if carried else None)
    head = f"{file_key(path)}: not simulated: {names}; " if carried else f"{file_key(path)}: "
    return head + no_optimum


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
    out.plan.ipu_config_carried = carried_from_ipu_config(data, cfg.workload.mode, str(path),
                                                         profile)
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
        if whole:  # PopTorch's pipeline rule with a tied head's own stage
            build_case(validate_whole(out, profile), profile)
        else:
            validate(out, check_layout=False)
        check_pinned_layout(out, pinned)
    except IpuTuneError as exc:
        raise _named_by_file(exc, data, cfg.workload.mode, str(path), pinned) from None
    return out


def _named_by_file(exc: IpuTuneError, data: Mapping[str, Any], mode: str, path: str,
                   pinned: frozenset[str]) -> IpuTuneError:
    """`exc`, led by the file's field that set the plan key it names (or, for IPUs the plan
    needs, the fields of its stages and replicas), unless the command line set that key."""
    text = str(exc)
    fields = ipu_config_fields(data, mode)
    if text.startswith("system.num_ipus=") and not {"plan.pipeline.splits",
                                                    "plan.replication_factor"} <= pinned:
        stages = managed_fields(data, mode)["ipus_per_replica"][0]
        return IpuTuneError(f"{file_key(path)}: {stages} and "
                            f"{fields['plan.replication_factor']} ({text})")
    for key, name in fields.items():
        if text.startswith(f"{key}=") and key not in pinned:
            unset = "" if name in data else "unset: IPUConfig's default; "
            return IpuTuneError(f"{file_key(path)}: {name} ({unset}sets {text})")
    return exc
