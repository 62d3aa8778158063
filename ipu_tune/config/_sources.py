"""Which YAML files Hydra may read: the package's `conf/` and the checked files of a
`--config-dir`, nothing else.

Hydra joins a group and its option into a path (`model=x` reads `model/x.yaml` in each folder
of its search path) and never checks it: `+experiment=../../x/cb` on the command line, or
`- /experiment/../../elsewhere/cb` in a defaults list, read a file outside every folder ipu-tune
checks, and that file's `hydra.callbacks`, `hydra.run.dir` and `${oc.env:...}` took effect
unchecked. So:

- a group's option is one name (`check_option`: no `/` or `\\`), and a config path of a
  defaults list names folders and a file, never `..`, `.` or an empty name
  (`check_config_path`), before Hydra runs;
- a `--config-dir` is walked as Hydra reads it, through symlinked folders (Python's `rglob`
  does not follow them, Hydra does), and the walk stops early on a folder too big to be one
  (`config_files`);
- while Hydra composes (`guarded_loads`), a file it reads must lie in the package's `conf/`
  or be one of the checked files (`vet`): a route to a file not foreseen above is refused in
  one line instead of read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ipu_tune.errors import IpuTuneError

__all__ = ["check_config_path", "check_option", "config_files", "guarded_loads",
           "header_package", "is_group", "vet"]

MAX_FILES = 2000
# Entries (files and folders of any kind) a walk visits before it gives up: `/` holds millions
# and took a minute to count before the file limit was met.
MAX_ENTRIES = 20_000
_NAME_MAX = 255
_SUFFIXES = (".yaml", ".yml")
# Real paths of the files of a --config-dir that passed the per-file checks (this process).
_vetted: dict[str, str] = {}
_HEADER_CHARS = 512  # what FileConfigSource reads for a file's header
_WHERE_ALLOWED = "a file in the package's conf/ or in a --config-dir"


def check_option(group: str, value: str, where: str = "") -> None:
    """A group's option `value` (`model=NAME`, `- model: NAME`) is one name: Hydra reads
    `<group>/<value>.yaml`, and a `/` in it would reach a file outside the group's folder."""
    if "/" in value or "\\" in value:
        raise IpuTuneError(
            f"{group}={value[:120]!r}{where}: an option of a group is one name (no / or \\): "
            f"Hydra would read the file it leads to, outside the {group} folder, unchecked; "
            f"allowed: NAME, for the file {group}/NAME.yaml in the package's conf/ or in a "
            "--config-dir")


def check_config_path(path: str, where: str = "", what: str = "defaults entry") -> None:
    """A config path of a defaults list (`/experiment/base`, `hydra/job_logging`): names
    between slashes, from the search path's root when it starts with `/`; `..`, `.` or an
    empty name would lead Hydra out of its folders."""
    parts = path.removeprefix("/").split("/")
    bad = next((p for p in parts if p in ("", ".", "..") or "\\" in p), None)
    if bad is not None:
        raise IpuTuneError(
            f"{what} {path[:120]!r}{where}: {bad!r} in a config path would lead Hydra to a file "
            f"outside its config folders, unchecked; allowed: GROUP/NAME (or /GROUP/NAME from "
            f"the top) with no '..', '.', empty name or backslash, naming {_WHERE_ALLOWED}")


def is_group(key: str, roots: Iterable[Path]) -> bool:
    """Whether Hydra reads the override key `key` (no +/~, no @package) as a config group:
    one of ipu-tune's, a path of groups (`hydra/job_logging`) or a folder in `roots`."""
    from ipu_tune.config._hydra import GROUPS

    if key in GROUPS or "/" in key:
        return True
    if not key or len(key.encode("utf-8", "surrogateescape")) > _NAME_MAX:
        return False
    try:
        return any((root / key).is_dir() for root in roots)
    except (OSError, ValueError):  # a NUL, or a name the file system cannot stat
        return False


def _too_big(flag: str, root: Path) -> IpuTuneError:
    return IpuTuneError(
        f"{flag}={str(root)[:120]!r}: more than {MAX_FILES} YAML files or {MAX_ENTRIES} "
        f"entries; allowed: a folder of config groups (experiment/, model/, system/, ...) "
        f"with at most {MAX_FILES} YAML files")


def config_files(root: Path, flag: str = "--config-dir") -> list[Path]:
    """The YAML files Hydra can read from the folder `root` (each by its path under `root`,
    through symlinked folders as Hydra follows them), sorted; a folder too big to be a config
    folder (`--config-dir /`) is refused within `MAX_ENTRIES` entries, not walked whole."""
    found: list[Path] = []
    entries = 0
    # (folder, real paths of the folders above it): a link back up is a loop, not walked.
    todo: list[tuple[Path, frozenset[str]]] = [(root, frozenset({os.path.realpath(root)}))]
    while todo:
        folder, above = todo.pop()
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:  # unreadable: Hydra cannot read a file there either
            continue
        for entry in children:
            entries += 1
            if entries > MAX_ENTRIES or len(found) > MAX_FILES:
                raise _too_big(flag, root)
            path = Path(entry.path)
            with contextlib.suppress(OSError):
                if entry.is_dir():
                    real = os.path.realpath(path)
                    if real not in above:
                        todo.append((path, above | {real}))
                elif path.suffix in _SUFFIXES:
                    found.append(path)
    if len(found) > MAX_FILES:
        raise _too_big(flag, root)
    return sorted(found)


def vet(texts: Mapping[Path, str]) -> None:
    """Record the files of a --config-dir that passed the per-file checks as readable, each
    with the digest of the text checked: Hydra is given that text or nothing (a file changed
    since its check is refused)."""
    _vetted.update({os.path.realpath(p): _digest(t) for p, t in texts.items()})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def header_package(text: str, path: Path) -> str:
    """The `@package` of a config file's header as Hydra reads it (its own parser, on the
    512 characters it reads: `#@package`, `#  @package` and `##@package` all count), or ""."""
    from hydra.plugins.config_source import ConfigSource

    try:
        return ConfigSource._get_header_dict(text[:_HEADER_CHARS])["package"] or ""
    except ValueError as exc:  # Hydra would refuse the file the same way, later
        raise IpuTuneError(f"config file {str(path)!r}: a bad header ({exc}); allowed: "
                           "# @package PACKAGE") from None


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


@contextlib.contextmanager
def guarded_loads(conf_dir: Path) -> Iterator[None]:
    """While Hydra composes: every config it loads has a path of names (no `..`), and a file
    it reads is in `conf_dir` (the primary config's folder) or one the checks vetted; anything
    else raises `IpuTuneError` before the file is read."""
    from hydra._internal.config_repository import ConfigRepository
    from hydra._internal.core_plugins.file_config_source import FileConfigSource

    roots = [os.path.realpath(conf_dir)]
    repo_load = ConfigRepository.load_config
    file_load = FileConfigSource.load_config

    def load_config(self: Any, config_path: str) -> Any:
        check_config_path(config_path, what="config")
        return repo_load(self, config_path)

    def load_file(self: Any, config_path: str) -> Any:
        name = self._normalize_file_name(config_path)
        full = os.path.realpath(os.path.join(self.path, name))
        if _inside(full, roots):
            return file_load(self, config_path)
        if full not in _vetted:
            raise IpuTuneError(
                f"config {config_path[:120]!r}: Hydra would read {full[:200]!r}, a file no "
                f"check has read; allowed: {_WHERE_ALLOWED}")
        return _checked_result(self, full)

    ConfigRepository.load_config = load_config  # type: ignore[method-assign]
    FileConfigSource.load_config = load_file  # type: ignore[method-assign]
    try:
        yield
    finally:
        ConfigRepository.load_config = repo_load  # type: ignore[method-assign]
        FileConfigSource.load_config = file_load  # type: ignore[method-assign]


def _checked_result(source: Any, full: str) -> Any:
    """What Hydra's `FileConfigSource.load_config` returns for `full`, made from one read of
    it whose text is the text checked: a file swapped after its check is refused, not read."""
    from hydra.plugins.config_source import ConfigResult, ConfigSource
    from omegaconf import OmegaConf

    from ipu_tune.config._yaml import read_text

    text = read_text(Path(full), "config file")
    if _digest(text) != _vetted[full]:
        raise IpuTuneError(f"config file {full[:200]!r}: changed after it was checked; "
                           "allowed: files left as they are while ipu-tune starts")
    return ConfigResult(config=OmegaConf.load(io.StringIO(text)),
                        path=f"{source.scheme()}://{source.path}", provider=source.provider,
                        header=ConfigSource._get_header_dict(text[:_HEADER_CHARS]))
