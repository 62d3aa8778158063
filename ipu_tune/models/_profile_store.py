"""Profiles on disk as data: JSON files checked field by field when read, never unpickled.

The cache folder may be shared or planted on (`IPU_TUNE_CACHE_DIR`): a file there must not be
able to run code, and a file that does not read back as a well-formed profile of the asked
key (wrong schema, wrong type, a NaN, a block outside the op list) is not used - the caller
profiles again and writes a good one over it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from ipu_tune.errors import IpuTuneError
from ipu_tune.files import atomic_write
from ipu_tune.models._profile import (
    INPUT_KINDS,
    INPUT_SOURCES,
    OP_KINDS,
    BlockProfile,
    ModelProfile,
    OpProfile,
)

__all__ = ["load_profile", "profile_path", "save_profile"]

_MAX_BYTES = 256 << 20  # BERT-Large's profile is ~2 MB; far beyond is not ours


class _Bad(Exception):
    """The file is not a well-formed profile of the key asked for."""


def profile_path(folder: Path, key: str) -> Path:
    return folder / "profiles" / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def _no_constant(name: str) -> Any:
    raise _Bad(f"non-finite number {name}")


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Bad(f"expected a non-negative integer, got {value!r}")
    return value


def _float(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _Bad(f"expected a finite non-negative number, got {value!r}")
    return float(value)


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _Bad(f"expected a string, got {value!r}")
    return value


_CHECKS = {int: _int, float: _float, str: _str, "int": _int, "float": _float, "str": _str}


_PLANS: dict[type, tuple[frozenset[str], tuple[tuple[str, Any], ...]]] = {}


def _record(cls: type[Any], data: Any) -> Any:
    """A flat frozen dataclass (`OpProfile`, `BlockProfile`) from a dict with exactly its
    fields, each of its declared type."""
    plan = _PLANS.get(cls)
    if plan is None:
        fields = dataclasses.fields(cls)
        plan = _PLANS[cls] = (frozenset(f.name for f in fields),
                              tuple((f.name, _CHECKS[f.type]) for f in fields))
    if type(data) is not dict or data.keys() != plan[0]:
        raise _Bad(f"{cls.__name__}: fields differ")
    return cls(**{name: check(data[name]) for name, check in plan[1]})


def _profile(data: Any) -> ModelProfile:
    if type(data) is not dict:
        raise _Bad("not a mapping")
    ops = tuple(_record(OpProfile, o) for o in _list(data.get("ops")))
    blocks = tuple(_record(BlockProfile, b) for b in _list(data.get("block_stats")))
    if any(o.kind not in OP_KINDS or o.block >= len(blocks) for o in ops):
        raise _Bad("op kind or block index out of range")
    if any(not b.first_op <= b.last_op <= len(ops) for b in blocks):
        raise _Bad("block op range out of range")
    shape = tuple(_int(d) for d in _list(data.get("input_shape")))
    kind = _str(data.get("input_kind"))
    pre = data.get("preprocess_s_per_sample")
    source = data.get("input_source")
    if kind not in INPUT_KINDS or not shape or any(d < 1 for d in shape):
        raise _Bad("input kind or shape")
    if source not in INPUT_SOURCES:
        raise _Bad("input source")
    head_block = _str(data.get("tied_head_block"))
    if head_block and head_block not in {b.name for b in blocks}:
        raise _Bad("tied head's block is no block")
    per_pack = _float(data.get("sequences_per_pack"))
    if per_pack < 1.0:
        raise _Bad("fewer than one sequence per pack")
    return ModelProfile(
        name=_str(data.get("name")), input_shape=shape, num_classes=_int(data.get("num_classes")),
        input_kind=kind, ops=ops, block_stats=blocks, sample_bytes=_int(data.get("sample_bytes")),
        preprocess_s_per_sample=None if pre is None else _float(pre),
        torch_version=_str(data.get("torch_version")), input_source=str(source),
        sequences_per_pack=per_pack, paired_tokens=_int(data.get("paired_tokens")),
        tied_head=_str(data.get("tied_head")), tied_head_block=head_block,
        meta_failure=_str(data.get("meta_failure")))


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise _Bad(f"expected a list, got {type(value).__name__}")
    return value


def load_profile(path: Path, key: str) -> ModelProfile | None:
    """The profile stored at `path` for `key`; None when missing or not well formed."""
    try:
        if not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return None
        data = json.loads(path.read_bytes(), parse_constant=_no_constant)
        if type(data) is not dict or data.get("key") != key:
            return None
        return _profile(data.get("profile"))
    except (OSError, ValueError, RecursionError, TypeError, _Bad):
        return None


def save_profile(path: Path, key: str, profile: ModelProfile) -> None:
    """Write atomically; a folder that cannot be written only costs the next run its speed."""
    body = {f.name: getattr(profile, f.name) for f in dataclasses.fields(ModelProfile)}
    body["ops"] = [dataclasses.asdict(o) for o in profile.ops]
    body["block_stats"] = [dataclasses.asdict(b) for b in profile.block_stats]
    body["input_shape"] = list(profile.input_shape)
    try:
        text = json.dumps({"key": key, "profile": body}, allow_nan=False)
        # Whole or absent; a Ctrl-C removes the temporary (`ipu_tune.files`).
        atomic_write(path, text, key="profile cache")
    except (IpuTuneError, ValueError):
        pass
