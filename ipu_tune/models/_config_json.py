"""The config.json `model.hf.config_file` names, read in one place: from the file, or from what
a stored study kept of it (`kept_config_files`).

The commands on a stored study (`report`, `explain`, `trials`) open no file its config names:
whoever can write the storage would choose which file of the reader's is read, and its values
would show in the errors. The tuner keeps the file's contents in the study
(`config_json_values`, through `SearchProblem.files_read`); those commands run inside
`kept_config_files`, which every reader here consults before the file system.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ipu_tune.config import parse_json, read_json_text
from ipu_tune.errors import IpuTuneError, bad_value

__all__ = ["config_json_label", "config_json_path", "config_json_stamp", "config_json_values",
           "kept_config_files"]

KEY = "model.hf.config_file"

# Path text (as the config gives it) -> the contents a stored study kept of that file.
_KEPT: ContextVar[Mapping[str, Any]] = ContextVar("kept_config_files", default=MappingProxyType({}))


@contextmanager
def kept_config_files(kept: Mapping[str, Any], where: str) -> Iterator[None]:
    """Within the block, the config.json at each path of `kept` reads as its kept contents
    (checked as a file's are; `where` names them in an error), never from the disk."""
    for path_text, data in kept.items():
        _checked(data, f"{KEY}={path_text!r} ({where})")
    token = _KEPT.set(dict(kept))
    try:
        yield
    finally:
        _KEPT.reset(token)


def config_json_label(path_text: str) -> str:
    """`path_text` as an error shows it: said to be the study's kept copy when it is one."""
    return f"{path_text} (as the study kept it)" if path_text in _KEPT.get() else path_text


def config_json_path(path_text: str) -> Path:
    """The config.json `model.hf.config_file` names: the file, or the one in the folder."""
    path = Path(path_text).expanduser()
    return path / "config.json" if path.is_dir() else path


def config_json_values(path_text: str) -> dict[str, Any]:
    """The checked contents of the config.json at `path_text` (kept ones first)."""
    kept = _KEPT.get()
    if path_text in kept:
        return _floats(json.loads(json.dumps(kept[path_text])))  # a copy: callers pop and edit
    text = read_json_text(config_json_path(path_text), "config.json", KEY)
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise bad_value(KEY, path_text, f"a readable config.json ({_one_line(exc)})") from None
    return _floats(_checked(data, f"{KEY}={path_text!r}"))


_FLOATS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _floats(data: Any) -> Any:
    """`data` with Transformers 5's JSON of a float JSON cannot hold, `{"__float__":
    "Infinity"}` (`PreTrainedConfig.to_json_string`), as that float, as its `from_pretrained`
    reads it (Mamba-2's `time_step_limit` of (0.0, inf))."""
    if isinstance(data, dict):
        if data.keys() == {"__float__"} and data["__float__"] in _FLOATS:
            return _FLOATS[data["__float__"]]
        return {k: _floats(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_floats(v) for v in data]
    return data


def config_json_stamp(path_text: str) -> str:
    """A digest of the config.json's contents (the profile cache's key: editing the file
    re-profiles the model; a rewrite may keep a file's size and time stamp)."""
    kept = _KEPT.get()
    if path_text in kept:
        text = json.dumps(kept[path_text], sort_keys=True)
    else:
        text = read_json_text(config_json_path(path_text), "config.json", KEY)
    return hashlib.sha256(text.encode()).hexdigest()


def _checked(data: Any, label: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise IpuTuneError(f'{label}: a Transformers config.json with a "model_type" key')
    return data


def _one_line(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters, its type first."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300]
