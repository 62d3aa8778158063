"""An optimum-graphcore `ipu_config.json` read and checked as `IPUConfig.__init__` (0.7.1)
checks it: its fields and types (`IPU_CONFIG_FIELDS`), the floors and ceilings of its counts,
per-IPU lists one value per IPU of a replica, serialisation splits; an unknown key or a value of
the wrong type ends with one line naming the key, the value and what is allowed. The plan it
gives is `_ipu_config_import`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipu_tune.config import LIMITS, parse_json, read_json_text
from ipu_tune.errors import IpuTuneError, bad_value, bound_text, key_name, shown
from ipu_tune.exports._ipu_config import IPU_CONFIG_FIELDS

__all__ = ["DEPRECATED", "KEY", "file_key", "managed_fields", "read_ipu_config"]

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


def file_key(path: str | Path) -> str:
    """How an error starts: the key and the path it was given (`plan.from_ipu_config='a.json'`),
    then the file's field (`replication_factor=0: ...`)."""
    return f"{KEY}={shown(str(path))}"


def read_ipu_config(path: str | Path) -> dict[str, Any]:
    """The checked contents of an `ipu_config.json` (a file or the folder holding one)."""
    where = file_key(path)
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "ipu_config.json"
    text = read_json_text(file, "ipu_config.json", KEY)
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
            # The key alone, if a name: a file given by mistake (credentials) is not echoed.
            raise IpuTuneError(f"{where}: {key_name(key)}: unknown key; IPUConfig's fields "
                               f"(optimum-graphcore 0.7.1): {allowed}")
        if not _matches(value, hint):
            raise IpuTuneError(f"{where}: {key}={shown(value)}: must be {hint}")
        _check_range(where, key, value)
    checked = {k: v for k, v in data.items() if k not in _IGNORED}
    for mode in ("train", "infer"):  # optimum checks both modes whichever one runs
        _check_lengths(where, managed_fields(checked, mode))
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
    ipus_key, ipus = managed_fields(data, mode)["ipus_per_replica"]
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
        assert floor is not None  # every field with a ceiling has a floor
        span = (f">= {bound_text(floor)}" if ceiling is None
                else f"in {bound_text(floor)}..{bound_text(ceiling)}")
        raise IpuTuneError(f"{where}: {key}={shown(value)}: {what} {span}")


def managed_fields(data: Mapping[str, Any], mode: str) -> dict[str, tuple[str, Any]]:
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
