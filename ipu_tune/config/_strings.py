"""Strings of a config: names from a fixed set, optional strings that are not empty, and paths
the operating system can open.

An empty optional string reads as "not set" where it is used (`if cfg.plan.from_ipu_config`)
but as a value in the study's fingerprint: it would start a study of its own while doing what
null does, so null is the one way to say "none". A path longer than the system takes makes
every `stat` raise (ENAMETOOLONG) wherever it is first touched: refused here, in one line.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from ipu_tune.config._schema import DATASETS, EvalConfig, TuneConfig
from ipu_tune.errors import bad_value

__all__ = ["check_path", "check_storage_path", "check_strings"]

# POSIX NAME_MAX and PATH_MAX as Linux and macOS file systems set them (255 bytes a name, 4096
# a path with its final NUL).
_NAME_MAX = 255
_PATH_MAX = 4095

# Optional strings of the schema, with what they take besides null.
_NOT_EMPTY = {
    "model._target_": "a dotted path of a factory (pkg.module.fn), or null",
    "model.hf.model_type": "a Transformers model type (bert, gpt2, llama, ...), or null",
    "model.hf.config_file": "a config.json or the folder holding one, or null",
    "model.hf.task": "a head (masked-lm, causal-lm, ...), or null for the type's usual one",
    "plan.from_ipu_config": "an ipu_config.json or the folder holding one, or null",
}
_TUNE_NOT_EMPTY = {
    "simulator.constants": "a constants YAML (calibrate --output), or null for the defaults",
    "study.storage": "a journal file, sqlite:///FILE, postgresql://USER@HOST/DB or memory, or "
                     "null for <results_dir>/ipu_tune.journal",
}
# Keys holding a path of the file system (`results_dir` also in `check_numbers`).
_PATH_KEYS = ("model.hf.config_file", "plan.from_ipu_config")
_TUNE_PATH_KEYS = ("simulator.constants", "results_dir")


def check_path(key: str, value: Any, path: str | None = None) -> None:
    """`path` (default: `value`) a path the file system can name: not empty, no control
    characters (a newline would forge lines of messages and logs), no name over 255 bytes, at
    most 4095 bytes in all. The message quotes `value`."""
    if not isinstance(value, str):
        return
    path = value if path is None else path
    if not path.strip():  # `Path("")` is the current folder
        raise bad_value(key, value, "empty; allowed: a path of a file or folder")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise bad_value(key, value, "control characters (a newline, ...) are not allowed in a "
                                    "path")
    size = len(path.encode("utf-8", "surrogateescape"))
    longest = max((len(p.encode("utf-8", "surrogateescape")) for p in path.split("/")),
                  default=0)
    if size > _PATH_MAX or longest > _NAME_MAX:
        raise bad_value(key, value, f"a path too long for the file system; allowed: at most "
                                    f"{_PATH_MAX} bytes, {_NAME_MAX} a name between slashes")


def check_strings(cfg: EvalConfig) -> None:
    """Raise `IpuTuneError` naming the first string of `cfg` outside what its key takes."""
    name = cfg.model.dataset.name
    if name not in DATASETS:
        raise bad_value("model.dataset.name", name, "allowed: " + ", ".join(DATASETS)
                        + " (data of your own: the name of its kind, its cost in sample_bytes "
                          "and preprocess_s_per_sample)", DATASETS)
    tune = isinstance(cfg, TuneConfig)
    empty = {**_NOT_EMPTY, **_TUNE_NOT_EMPTY} if tune else _NOT_EMPTY
    for key, allowed in empty.items():
        value = attrgetter(key)(cfg)
        if isinstance(value, str) and not value.strip():
            raise bad_value(key, value, f"empty; allowed: {allowed}")
    for key in _PATH_KEYS + _TUNE_PATH_KEYS if tune else _PATH_KEYS:
        check_path(key, attrgetter(key)(cfg))
    if isinstance(cfg, TuneConfig):
        _check_tune_paths(cfg)


def _check_tune_paths(cfg: TuneConfig) -> None:
    if "://" in cfg.results_dir:  # Path() would make folders of the URL, its password included
        raise bad_value("results_dir", cfg.results_dir, "a URL; allowed: a folder (a storage "
                                                        "URL goes in study.storage)")
    check_storage_path("study.storage", cfg.study.storage)


def check_storage_path(key: str, storage: str | None) -> None:
    """`check_path` of the file a storage names: a journal (`*.journal`, `journal:///PATH`)
    or SQLite (`sqlite:///PATH`); a server's URL names no file here."""
    if storage and storage.startswith(("sqlite:///", "journal:///")):
        path = storage.split(":///", 1)[1]
        if path or storage.startswith("journal"):  # SQLite's none: in memory, refused by name
            check_path(key, storage, path)
    elif storage and "://" not in storage:
        check_path(key, storage)
