"""One rule for code: only `model._target_` may name code to run.

Hydra has side doors that name code too: `hydra.callbacks` (instantiated before the task runs),
launcher and sweeper plugins, `hydra.searchpath` (`pkg://` imports a package),
`hydra.job.env_set`, the logging configs (`logging.config.dictConfig` calls any `()` factory)
and `--experimental-rerun` (unpickles a file). `check_side_doors` reads the command line and
every YAML file of a user config folder (`--config-dir`) as text and data, before Hydra
composes or instantiates anything, and refuses any of these with one line, trusted or not.
Interpolations in a user's config file, as YAML reads it (a resolver such as `${oc.env:...}`, or
a copy such as `${study.storage}`), are refused unless the run is trusted: the file's author
would otherwise choose what lands in the stored study, a password or the environment included.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ipu_tune.config._cycles import check_cycles
from ipu_tune.config._hydra import CONF_DIR, parse_overrides, split_hydra_args
from ipu_tune.config._messages import composed_name
from ipu_tune.config._shapes import check_file_shapes
from ipu_tune.config._sources import (
    check_config_path,
    check_option,
    config_files,
    header_package,
    is_group,
    vet,
)
from ipu_tune.config._strings import check_path
from ipu_tune.config._yaml import parse_yaml, read_text, read_yaml
from ipu_tune.errors import IpuTuneError

__all__ = [
    "check_side_doors",
    "composed_file_error",
    "config_dirs",
    "reject_interpolation",
    "trusted_composition",
]

# hydra.* keys that name neither code nor a place to write; every other one may name code
# (callbacks, launcher, ...) or move Hydra's files out of results_dir (run.dir, sweep.dir,
# output_subdir, whose .hydra/ copies every override, passwords included; job.chdir moves
# the relative paths).
_SAFE_HYDRA_KEYS = frozenset({"hydra.job.name", "hydra.verbose"})
# Hydra's own logging presets (its package's files) that write no log file: they name no code.
_SAFE_HYDRA_GROUPS: Mapping[str, frozenset[str]] = {
    "hydra/job_logging": frozenset({"none", "disabled", "stdout"}),
    "hydra/hydra_logging": frozenset({"none", "disabled", "default"}),
}
_DIR_FLAGS = ("--config-dir", "-cd")
# Hydra's flags that replace ipu-tune's primary config (conf/config.yaml, built on the schema):
# its name could lead out of every folder (`-cn ../../x`), and a folder of another config.yaml
# would drop the schema's checks.
_PRIMARY_FLAGS = ("--config-path", "-cp", "--config-name", "-cn")
_REFUSED_FLAGS = ("--experimental-rerun",)
# `_target_:` as a key inside a dict value (`+plan={_target_: os.system}`).
_TARGET_KEY = re.compile(r"[{,]\s*['\"]?_target_['\"]?\s*:")
_ALLOWED = ("allowed: model._target_ (a torch.nn.Module or a factory of one), and of Hydra's "
            "keys only " + ", ".join(sorted(_SAFE_HYDRA_KEYS)) + ", hydra/job_logging=none|"
            "disabled|stdout, hydra/hydra_logging=none|disabled|default")


def _show(text: str) -> str:
    return repr(text[:120])


def _check_key(key: str, value: str, where: str) -> None:
    """One override `key=value` (key with its +/~ prefixes and an optional @package)."""
    bare = key.lstrip("+~")
    group, _, package = bare.partition("@")
    if group in _SAFE_HYDRA_GROUPS and not package and value in _SAFE_HYDRA_GROUPS[group]:
        return
    names_hydra = any(p == "hydra" or p.startswith(("hydra.", "hydra/"))
                      for p in (group, package, package.removeprefix("_global_.")))
    if names_hydra and group not in _SAFE_HYDRA_KEYS:
        raise IpuTuneError(f"{key}={_show(value)}{where}: Hydra keys that can name code "
                           f"(callbacks, launcher, sweeper, searchpath, env_set, logging) or "
                           f"write outside results_dir (run.dir, sweep.dir, output_subdir, "
                           f"log files) are refused; {_ALLOWED}")
    if group != "model._target_" and ("_target_" in group or _TARGET_KEY.search(value)):
        raise IpuTuneError(f"{key}={_show(value)}{where}: only model._target_ may name code; "
                           f"{_ALLOWED}")


def config_dirs(argv: Sequence[str]) -> list[str]:
    """The user config folders the arguments add (`--config-dir X`, `-cd=X`, ...)."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in _DIR_FLAGS:
            if eq:
                found.append(value)
            elif i + 1 < len(argv):
                found.append(argv[i + 1])
    return found


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, node
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, (*path, str(i)))


def _check_defaults(entries: Any, where: str) -> None:
    """A defaults list: no route to code, and every config it names by a path of names (a
    group's option by one name), so Hydra reads no file outside the checked folders."""
    for entry in entries if isinstance(entries, list) else []:
        pairs = entry.items() if isinstance(entry, Mapping) else [(str(entry), None)]
        for key, value in pairs:
            name = str(key).replace("override ", "").replace("optional ", "").strip()
            if name != "_self_":
                check_config_path(name.partition("@")[0], where)
            options = value if isinstance(value, list) else [value]
            for option in (o for o in options if isinstance(o, str)):
                check_option(name.partition("@")[0].lstrip("/"), option, where)
            _check_key(name.lstrip("/"), "" if value is None else str(value), where)


def _check_file(path: Path, root: Path, trusted: bool, texts: dict[Path, str]) -> Any:
    """The data of a file of a config folder, once checked for routes to code; the text
    checked is kept in `texts` (Hydra may read only that text: `vet`)."""
    where = f" in {str(path)!r}"
    if not path.is_file():  # a FIFO would block the read; a device never ends
        raise IpuTuneError(f"config file {str(path)!r}: not a regular file")
    text = texts[path] = read_text(path, "config file")
    rel = path.relative_to(root).parts
    package = header_package(text, path)
    if rel[0] == "hydra" or "hydra" in package:
        _check_key("hydra", "", where)
    data = parse_yaml(text, f"config file {str(path)!r}")  # the text checked, read once
    if not trusted:
        _check_interpolations(data, path)
    if not isinstance(data, Mapping):
        return data
    in_model = rel[0] == "model" and "_global_" not in package
    for keys, value in _walk(data, ()):
        if keys and keys[0] == "hydra" and not isinstance(value, Mapping):
            _check_key(".".join(keys), str(value), where)
        if keys == ("defaults",):
            _check_defaults(value, where)
        if keys and keys[-1] == "_target_":
            full = ("model", *keys) if in_model else keys
            if full != ("model", "_target_"):
                _check_key(".".join(full), str(value), where)
    return data


def _check_interpolations(data: Any, path: Path) -> None:
    """An interpolation in a file of a config folder, as YAML reads it (`\u0024{...}` is one
    too): a resolver would read the environment (`${oc.env:PGPASSWORD}`) and a plain one copy
    any value (`${study.storage}`, a password) into the stored study and its exports."""
    for keys, value in _walk(data, ()):
        found = next((s for s in (value, keys[-1] if keys else "")
                      if isinstance(s, str) and "${" in s), None)
        if found is not None:
            raise IpuTuneError(
                f"config file {str(path)!r}: {'.'.join(keys)}={found[:80]!r} interpolates "
                "(${...}: a resolver such as oc.env, or a copy of another value such as "
                "study.storage); allowed in a file only with trust_remote_code=true")


def _check_shadowing(path: Path, root: Path) -> None:
    """A file of a user config folder named as a built-in option (`model/resnet101.yaml`) or
    as the primary config (`config.yaml`): Hydra searches the package's folder first, so it
    would read the built-in file and ignore this one without a word."""
    rel = path.relative_to(root)
    if not (CONF_DIR / rel.parent / f"{rel.stem}.yaml").is_file():
        return
    group, name = "/".join(rel.parent.parts), rel.stem
    if not group:
        raise IpuTuneError(f"config file {str(path)!r}: shadows the built-in primary config "
                           f"{rel.stem}.yaml, which Hydra reads instead of it; allowed: a file "
                           "in a group folder (experiment/NAME.yaml, chosen with "
                           "+experiment=NAME)")
    raise IpuTuneError(f"config file {str(path)!r}: shadows the built-in option {group}={name}, "
                       f"which Hydra reads instead of it; allowed: another name (e.g. "
                       f"{group}/my_{name}.yaml, chosen with {group}=my_{name})")


def composed_file_error(error: str, argv: Sequence[str]) -> IpuTuneError | None:
    """Why the file of a config folder of `argv` that Hydra's `error` names (`In
    'experiment/x': ...`) failed its composition, when a value of it has the wrong shape for
    its key (`check_file_shapes`): Hydra and OmegaConf word that without the key or the value.
    None: not that."""
    name = composed_name(error)
    for folder in config_dirs(argv) if name else ():
        root = Path(folder)
        path = next((p for p in (root / f"{name}.yaml", root / f"{name}.yml") if p.is_file()),
                    None)
        if path is None:
            continue
        header = header_package(read_text(path, "config file"), path)
        # Hydra places a group's file at its folder's keys (model/x.yaml: model), or the
        # header's package.
        package = header.removeprefix("_global_").lstrip(".") if header else ".".join(
            path.relative_to(root).parts[:-1])
        try:
            check_file_shapes(read_yaml(path, "config file"), package, str(name))
        except IpuTuneError as exc:
            return exc
    return None


def check_side_doors(argv: Sequence[str], trusted: bool) -> None:
    """Refuse, before anything is composed or run, every route to code other than
    `model._target_` and every route to a file no check reads: on the command line and in
    every file of a user config folder (which are then the only files Hydra may read besides
    the package's, `guarded_loads`)."""
    dirs = config_dirs(argv)
    for arg in argv:
        flag = arg.partition("=")[0]
        if flag in _REFUSED_FLAGS:
            raise IpuTuneError(f"{flag}: refused (it unpickles a file, which can run code)")
        if flag in _PRIMARY_FLAGS:
            raise IpuTuneError(f"{flag}: replaces ipu-tune's primary config (its conf/config."
                               "yaml and the schema it builds on); allowed: --config-dir DIR, "
                               "a folder of config groups added to the search path, and "
                               "+experiment=NAME for a file DIR/experiment/NAME.yaml")
    flags, overrides = split_hydra_args(argv) if any(a.startswith("-") for a in argv) else (
        [], list(argv))
    roots = [CONF_DIR, *map(Path, dirs)]
    for arg in overrides:
        key, _, value = arg.partition("=")
        _check_key(key, value, "")
        group = key.lstrip("+~").partition("@")[0]
        if group == "model._target_" and "${" in value and not trusted:
            # `${model.name}`: the code name comes from whatever a config file put there.
            raise IpuTuneError(f"{key}={_show(value)}: interpolates its code name from the "
                               "config, not typed on the command line; code named in a file "
                               "runs only with trust_remote_code=true")
        if is_group(group, roots):
            check_option(group, value)
    if flags:
        # Hydra runs next and would print its own (unredacted) error.
        parse_overrides(overrides)
    for folder in dirs:
        _check_folder(folder, trusted)


def _check_folder(folder: str, trusted: bool) -> None:
    """Every file Hydra can read in the --config-dir `folder`, checked, then vetted."""
    if folder.startswith("pkg://"):
        raise IpuTuneError(f"--config-dir={_show(folder)}: pkg:// imports a package; "
                           "allowed: a folder")
    check_path("--config-dir", folder)
    root = Path(folder)
    if not root.is_dir():  # Hydra's own words name neither the flag nor what it takes
        raise IpuTuneError(f"--config-dir={_show(folder)}: not a folder; allowed: a folder "
                           "of config groups (experiment/, model/, system/, ...)")
    files = config_files(root)
    for path in files:
        _check_shadowing(path, root)
    texts: dict[Path, str] = {}
    check_cycles(root, {path: _check_file(path, root, trusted, texts) for path in files})
    vet(texts)


# Keys of a composition that decide where files go or which code runs: a cached composition
# must hold the values conf/config.yaml gives them (no packaged group file changes them).
_PLACES = (("results_dir",), ("study", "storage"), ("study", "name"), ("model", "_target_"))


def trusted_composition(found: Any, conf_dir: Path | None = None) -> dict[str, Any] | None:
    """A cached composition (a file anyone with access to the cache folder could edit) when its
    placing keys are `conf_dir`/config.yaml's own (default: the package's conf/); None
    otherwise (compose again)."""
    if not isinstance(found, dict):
        return None
    conf = read_yaml((conf_dir or CONF_DIR) / "config.yaml", "config file")
    for keys in _PLACES:
        want: Any = conf
        got: Any = found
        for key in keys:
            want = want.get(key) if isinstance(want, Mapping) else None
            got = got.get(key) if isinstance(got, Mapping) else None
        if got != want:
            return None
    return found


def reject_interpolation(node: Any, path: str) -> None:
    """`${...}` in a plain mapping (a stored study, best.yaml, an API dict) is refused, not
    resolved: `${oc.env:X}` would read the environment of whoever loads it."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            reject_interpolation(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list | tuple):
        for item in node:
            reject_interpolation(item, path)
    elif isinstance(node, str) and "${" in node:
        raise IpuTuneError(f"{path}={node[:80]!r}: an interpolation in a stored or plain config "
                           "is never resolved; allowed: plain values")
