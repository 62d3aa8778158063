"""The record Hydra saves of a sweep (`-m`): `<hydra.sweep.dir>/multirun.yaml`, the composed
config and its overrides, unredacted.

`SweepRecordGuard` is a Hydra callback (`hydra.callbacks` of conf/config.yaml, Hydra's public
API): `on_multirun_start` receives the config exactly as the basic sweeper then saves it, so the
check reads what would be written, wherever it came from (an override, a `--config-dir` file,
its defaults list, a YAML escape), after Hydra composed it and before it writes anything.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ipu_tune.cli._common import fail
from ipu_tune.errors import IpuTuneError

__all__ = ["SweepRecordGuard", "check_sweep_record"]

# Hydra's facts of the process (its cwd, the files it read): no value a config gives.
_NOT_GIVEN = ("hydra", "runtime")


class SweepRecordGuard(Callback):
    """Refuses a sweep whose record would land outside results_dir or hold a password."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_sweep_record(config)
        except IpuTuneError as exc:
            # Hydra turns an Exception in a callback into a warning and runs on: exit here.
            sys.exit(fail(str(exc), exc.fault))


def check_sweep_record(config: DictConfig) -> None:
    """Refuse the sweep when its record would leave `results_dir` (Hydra follows a link at
    `multirun/` or `multirun.yaml`), replace anything but a regular file, or hold a password."""
    from ipu_tune.files import check_target, inside
    from ipu_tune.storage import redact

    record = Path(str(config.hydra.sweep.dir)) / "multirun.yaml"
    root = str(config.results_dir)
    key, value = _sweep_key(config)
    if not inside(record, root):
        raise IpuTuneError(f"{key}={value!r}: the sweep's record {str(record)!r} resolves "
                           f"outside results_dir={root!r} (a link); allowed: a folder inside "
                           "it that is no link out")
    try:
        check_target(record, "its record")
    except IpuTuneError as exc:
        raise IpuTuneError(f"{key}={value!r}: {exc}") from None
    for keys, text in _strings(OmegaConf.to_container(config, resolve=False), ()):
        shown = redact(text)
        if shown != text:
            where = (f"the override {shown!r}" if keys[:3] == ("hydra", "overrides", "task")
                     else f"{'.'.join(keys)}={shown!r}")
            raise IpuTuneError(
                f"{where}: a password in a sweep (-m) would be saved by Hydra in {record}; "
                "allowed: the URL without the password, with PGPASSWORD or ~/.pgpass (read "
                "by libpq and psycopg)")


def _sweep_key(config: DictConfig) -> tuple[str, str]:
    """The key the sweep's folder comes from: `hydra.sweep.dir` when set, else results_dir
    (conf/config.yaml places the sweep at `${results_dir}/multirun`)."""
    root = str(config.results_dir)
    if str(config.hydra.sweep.dir) == f"{root}/multirun":
        return "results_dir", root
    return "hydra.sweep.dir", str(config.hydra.sweep.dir)


def _strings(node: Any, keys: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string of the config (keys too) with the path of keys to it."""
    if keys == _NOT_GIVEN:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _strings(key, keys)
            yield from _strings(value, (*keys, str(key)))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _strings(item, (*keys, str(i)))
    elif isinstance(node, str):
        yield keys, node
