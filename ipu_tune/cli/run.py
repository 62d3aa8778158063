"""The Hydra app: `python -m ipu_tune [overrides]` tunes, resumes and exports.

A thin `@hydra.main` calls the plain `ipu_tune.tuner.run(cfg)` with the typed config. Before
Hydra runs (and writes anything), `preflight` composes the same overrides with `compose()` and
runs every check, so a bad override ends with one line and a non-zero exit.

Start-up (issue 16): Hydra is imported only when it composes. A single run whose arguments
are group choices by name and plain `key=value` overrides (the common case, e.g. the main
command) starts from Hydra's composition of those group choices, cached on disk per state of
conf/ and of the schema, and sets the overridden keys on it (`_quick_compose`); anything else
(`~`, a new `+` key, a list, a quoted or interpolated value, a sweep, a Hydra flag) is composed
by Hydra as before. A test checks that both give the same config.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipu_tune.cli._common import (
    check_target_typed,
    fail,
    fail_on_disk_error,
    split_trust_flag,
)
from ipu_tune.cli._comparison import format_comparison
from ipu_tune.cli._summary import format_summary
from ipu_tune.config import (
    CONF_DIR,
    GROUPS,
    TuneConfig,
    check_side_doors,
    group_options,
    omegaconf_error,
    register,
    to_plain_dict,
    trusted_composition,
    typed,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import cache_dir
from ipu_tune.tuner import Prepared, RunSummary, prepare, run

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

__all__ = ["hydra_main", "pinned_keys", "preflight"]

# Flags after which Hydra does not run the task (help, printing config, completion).
_NO_RUN_FLAGS = {"-h", "--help", "--hydra-help", "-i", "--info", "-c", "--cfg", "-sc",
                 "--shell-completion", "-cp", "--config-path", "-cn", "--config-name",
                 "-cd", "--config-dir", "--resolve", "-p", "--package", "--experimental-rerun"}
_MAX_SWEEP_CHECKS = 256
# The runs the preflight checked, handed to the Hydra task (one per composed config).
_PREPARED: list[Prepared] = []
# trust_remote_code=true of this process's command line (taken out before Hydra sees it).
_TRUSTED = [False]
# The summaries of this command's runs (several under `-m`), for the closing comparison table.
_SUMMARIES: list[RunSummary] = []


def pinned_keys(overrides: Sequence[str]) -> frozenset[str]:
    """Plan/workload keys the user set on the command line: the search never changes them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    keys = {o.key_or_group.lstrip("+~") for o in parsed}
    return _pinned(keys)


def _pinned(keys: set[str]) -> frozenset[str]:
    return frozenset(k for k in keys if k.startswith(("plan.", "workload.")))


def _check_groups(parsed: list[Override]) -> None:
    for o in parsed:
        group = o.key_or_group
        if group not in GROUPS or o.is_delete():
            continue
        allowed = group_options(group)
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.value()]
        for value in values:
            if value not in allowed:
                raise IpuTuneError(
                    f"{group}={value}: unknown {group} option; allowed: {', '.join(allowed)}"
                )


def _compose_raw(overrides: list[str]) -> Any:
    """Hydra's composition of `overrides` (a DictConfig); errors as one `IpuTuneError` line."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            return compose(config_name="config", overrides=overrides)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    except HydraException as exc:
        cause = exc.__cause__
        if isinstance(cause, OmegaConfBaseException):
            raise omegaconf_error(cause) from None
        raise IpuTuneError(str(exc).strip().splitlines()[0]) from None
    finally:
        GlobalHydra.instance().clear()


def _compose(overrides: list[str]) -> TuneConfig:
    return typed(TuneConfig, _compose_raw(overrides))


def preflight(argv: Sequence[str], trust_remote_code: bool = False) -> None:
    """Compose and check every run the arguments ask for; raise `IpuTuneError` on the first."""
    if any(a.split("=")[0] in _NO_RUN_FLAGS for a in argv):
        return
    _PREPARED.clear()
    quick = _quick_compose(argv)
    if quick is not None:
        check_target_typed(quick.model._target_, list(argv), trust_remote_code)
        _PREPARED.append(prepare(quick, _pinned({a.partition("=")[0] for a in argv})))
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    overrides = [a for a in argv if not a.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise IpuTuneError(str(exc).strip().splitlines()[0]) from None
    _check_groups(parsed)
    choices = [
        [f"{raw.split('=', 1)[0]}={v}" for v in o.sweep_string_iterator()]
        if o.is_sweep_override()
        else [raw]
        for o, raw in zip(parsed, overrides, strict=True)
    ]
    for combo in itertools.islice(itertools.product(*choices), _MAX_SWEEP_CHECKS):
        cfg = _compose(list(combo))
        check_target_typed(cfg.model._target_, list(combo), trust_remote_code)
        _PREPARED.append(prepare(cfg, pinned_keys(list(combo))))


def _prepared(cfg: TuneConfig, pinned: frozenset[str]) -> Prepared | TuneConfig:
    """The preflight's preparation of this run (so it is not prepared twice), else `cfg`."""
    return next((p for p in _PREPARED if p.cfg == cfg and p.pinned == pinned), cfg)


def _task(cfg: Any) -> None:
    """The Hydra task (`@hydra.main`, see `_hydra_task`): one composed config, one run."""
    from hydra.core.hydra_config import HydraConfig

    try:
        tune_cfg = typed(TuneConfig, cfg)
        check_target_typed(tune_cfg.model._target_, HydraConfig.get().overrides.task,
                           _TRUSTED[0])  # also when --config-dir skipped the preflight
        pinned = pinned_keys(HydraConfig.get().overrides.task)
        summary = run(_prepared(tune_cfg, pinned), pinned)
    except IpuTuneError as exc:
        sys.exit(fail(str(exc)))
    except Exception as exc:  # a full or read-only disk is one line; anything else is a bug
        sys.exit(fail_on_disk_error(exc))
    print(format_summary(summary))
    _SUMMARIES.append(summary)


def _composed_once(argv: Sequence[str]) -> bool:
    """A single run with no Hydra flag or `hydra.*` override: the preflight's composition and
    preparation are the run's (conf/config.yaml runs in `.`, writes no `.hydra/`, sets no
    logging), so Hydra need not compose it again (~1 s, issue 16)."""
    return len(_PREPARED) == 1 and not any(
        a.startswith("-") or a.lstrip("+~").startswith("hydra") for a in argv)


def _run_prepared(prepared: Prepared) -> int:
    try:
        summary = run(prepared, prepared.pinned)
    except IpuTuneError as exc:
        return fail(str(exc))
    except Exception as exc:  # a full or read-only disk is one line; anything else is a bug
        return fail_on_disk_error(exc)
    # (SIGINT/SIGTERM arrive as KeyboardInterrupt and are reported by `__main__`: 130/143.)
    print(format_summary(summary))
    return 0


def _hydra_task() -> Callable[[], None]:
    """`_task` under `@hydra.main` (built on use: importing Hydra costs ~0.5 s, issue 16)."""
    import hydra

    main: Callable[[], None] = hydra.main(version_base="1.3", config_path=str(CONF_DIR),
                                          config_name="config")(_task)
    return main


# -- a single run of the default groups, composed without importing Hydra -------------------

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Values Hydra's override grammar reads the same way as here (anything else: Hydra composes).
_INT = re.compile(r"[+-]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"[+-]?(0|[1-9][0-9]*)\.[0-9]+$")
_WORD = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*$")
_NOT_WORDS = {"inf", "nan", "true", "false", "null"}
_MISSING = object()


def _plain_value(text: str) -> Any:
    """The value Hydra's grammar gives an unquoted `text`, or `_MISSING` when it is not one of
    the plain forms handled here (bool, null, int, decimal float, a word or path)."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "null":
        return None
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if _WORD.match(text) and low not in _NOT_WORDS:
        return text
    return _MISSING


def _state_key() -> str:
    """What the composition of the defaults depends on: conf/, the schema, Hydra, OmegaConf."""
    h = hashlib.sha256(b"ipu-tune compose 1\0")
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        h.update(str(path.relative_to(CONF_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    pkg = Path(__file__).resolve().parent.parent
    for path in (pkg / "config" / "_schema.py", pkg / "knobs.py"):
        h.update(path.read_bytes() + b"\0")
    for name in ("hydra", "omegaconf"):  # their version, without importing them
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin else None
        h.update(f"{name}:{origin}:{st.st_mtime_ns if st else 0}\0".encode())
    return h.hexdigest()[:32]


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, dict):
        return any(_has_interpolation(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return isinstance(node, str) and "${" in node


def _group_composition(groups: list[str]) -> dict[str, Any] | None:
    """Hydra's composition of conf/config.yaml with the group choices `groups` only, as plain
    containers; cached in the profile cache folder (a file per state of conf/ and the schema
    and per list of choices). None when the composition holds an interpolation (a key set
    later could change what it resolves to) or fails (Hydra then words the error)."""
    key = hashlib.sha256("\0".join([_state_key(), *groups]).encode()).hexdigest()[:32]
    path = cache_dir() / f"compose-{key}.json"
    try:
        found = trusted_composition(json.loads(path.read_text()))  # where files go: conf's
        if found is not None:
            return found
    except (OSError, ValueError, IpuTuneError):
        pass
    from omegaconf import OmegaConf

    try:
        composed = _compose_raw(groups)
        if _has_interpolation(OmegaConf.to_container(composed, resolve=False)):
            return None
        plain = to_plain_dict(typed(TuneConfig, composed))
    except IpuTuneError:
        return None
    try:  # a cache: a folder that cannot be written only costs the next run its speed
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".compose.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(plain, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return plain


def _is_group_choice(key: str) -> bool:
    """`model=...`, `+experiment=...`: a config group's option chosen by name."""
    return key == "+experiment" or (key in GROUPS and key != "experiment")


def _quick_compose(argv: Sequence[str]) -> TuneConfig | None:
    """The config of a single run whose arguments are group choices by name (`model=bert_base`,
    `+experiment=seed_resnet101`) and plain `a.b=value` overrides of keys the composition of
    those groups has: Hydra's cached composition of the groups, then the values set (Hydra
    also applies command-line values after the defaults tree). None when Hydra must compose
    (`~`, a new `+` key, a list, a quoted or interpolated value, a sweep, a Hydra flag or
    `hydra.*`), also when the result would be an error: Hydra words it."""
    groups: list[str] = []
    edits: list[tuple[list[str], Any]] = []
    for arg in argv:
        key, eq, text = arg.partition("=")
        if eq and _is_group_choice(key) and _WORD.match(text):
            groups.append(arg)
            continue
        value = _plain_value(text) if eq else _MISSING
        if (value is _MISSING or not _KEY.match(key) or key in GROUPS
                or key.split(".")[0] == "hydra"):
            return None  # a flag, +/~, a sweep, a list, a quoted string ...
        edits.append((key.split("."), value))
    plain = _group_composition(groups)
    if plain is None:
        return None
    for parts, value in edits:
        node: Any = plain
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node or isinstance(
                node[parts[-1]], dict | list):
            return None
        node[parts[-1]] = value
    try:
        return typed(TuneConfig, plain)
    except IpuTuneError:
        return None


def hydra_main(argv: Sequence[str]) -> int:
    try:
        argv, trusted = split_trust_flag(argv)
        _TRUSTED[0] = trusted
        check_side_doors(argv, trusted)  # only model._target_ names code; before Hydra runs
        preflight(argv, trusted)
    except IpuTuneError as exc:
        return fail(str(exc))
    if _composed_once(argv):
        return _run_prepared(_PREPARED[0])
    sys.argv = [sys.argv[0], *argv]
    _SUMMARIES.clear()
    register()
    _hydra_task()()
    if {"-m", "--multirun"} & set(argv) and _SUMMARIES:
        print(format_comparison(_SUMMARIES))  # one table comparing the sweep's runs
    return 0

