"""The Hydra app: `python -m ipu_tune [overrides]` tunes, resumes and exports.

A thin `@hydra.main` calls the plain `ipu_tune.tuner.run(cfg)` with the typed config. Before
Hydra runs (and writes anything), `preflight` composes the same overrides with `compose()` and
runs every check, so a bad override ends with one line and a non-zero exit.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

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
    group_options,
    omegaconf_error,
    register,
    typed,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.tuner import Prepared, RunSummary, prepare, run

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
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    keys = {o.key_or_group.lstrip("+~") for o in parsed}
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


def _compose(overrides: list[str]) -> TuneConfig:
    register()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
            cfg = compose(config_name="config", overrides=overrides)
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc) from None
    except HydraException as exc:
        cause = exc.__cause__
        if isinstance(cause, OmegaConfBaseException):
            raise omegaconf_error(cause) from None
        raise IpuTuneError(str(exc).strip().splitlines()[0]) from None
    finally:
        GlobalHydra.instance().clear()
    return typed(TuneConfig, cfg)


def preflight(argv: Sequence[str], trust_remote_code: bool = False) -> None:
    """Compose and check every run the arguments ask for; raise `IpuTuneError` on the first."""
    if any(a.split("=")[0] in _NO_RUN_FLAGS for a in argv):
        return
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
    _PREPARED.clear()
    for combo in itertools.islice(itertools.product(*choices), _MAX_SWEEP_CHECKS):
        cfg = _compose(list(combo))
        check_target_typed(cfg.model._target_, list(combo), trust_remote_code)
        _PREPARED.append(prepare(cfg, pinned_keys(list(combo))))


def _prepared(cfg: TuneConfig, pinned: frozenset[str]) -> Prepared | TuneConfig:
    """The preflight's preparation of this run (so it is not prepared twice), else `cfg`."""
    return next((p for p in _PREPARED if p.cfg == cfg and p.pinned == pinned), cfg)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _task(cfg: DictConfig) -> None:
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


def hydra_main(argv: Sequence[str]) -> int:
    register()
    try:
        argv, trusted = split_trust_flag(argv)
        _TRUSTED[0] = trusted
        preflight(argv, trusted)
    except IpuTuneError as exc:
        return fail(str(exc))
    if _composed_once(argv):
        return _run_prepared(_PREPARED[0])
    sys.argv = [sys.argv[0], *argv]
    _SUMMARIES.clear()
    _task()
    if {"-m", "--multirun"} & set(argv) and _SUMMARIES:
        print(format_comparison(_SUMMARIES))  # one table comparing the sweep's runs
    return 0

