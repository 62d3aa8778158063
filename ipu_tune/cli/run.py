"""The Hydra app: `python -m ipu_tune [overrides]` tunes, resumes and exports.

A thin `@hydra.main` calls the plain `ipu_tune.tuner.run(cfg)` with the typed config. Before
Hydra runs (and writes anything), `preflight` composes the same overrides and runs every check,
so a bad override ends with one line and a non-zero exit.

Start-up: Hydra is imported only when it composes. A single run of group choices by name and
plain `key=value` overrides (the main command) is composed by `ipu_tune.config.quick_compose`
from a cached composition and runs without Hydra; anything else goes through `@hydra.main`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
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
    GIVEN_OVERRIDES,
    GROUPS,
    TuneConfig,
    check_side_doors,
    check_sweep,
    compose,
    composed_file_error,
    group_options,
    guarded_loads,
    hydra_error,
    parse_overrides,
    quick_compose,
    register,
    split_hydra_args,
    typed,
)
from ipu_tune.errors import IpuTuneError, did_you_mean
from ipu_tune.models import cache_dir, hf_source
from ipu_tune.tuner import Prepared, RunSummary, check_shared_studies, prepare, run

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override

__all__ = ["hydra_main", "pinned_keys", "preflight"]

# Flags after which Hydra does not run the task (help, printing config, completion).
_NO_RUN_FLAGS = {"-h", "--help", "--hydra-help", "-i", "--info", "-c", "--cfg", "-sc",
                 "--shell-completion", "-cp", "--config-path", "-cn", "--config-name",
                 "-cd", "--config-dir", "--resolve", "-p", "--package", "--experimental-rerun"}
# Flags after which Hydra prints the composed config or its sources (redacted: `_redacted_stdout`).
_PRINT_FLAGS = frozenset({"-c", "--cfg", "-i", "--info", "-h", "--help", "--hydra-help", "-p",
                          "--package", "--resolve"})
_MAX_SWEEP_CHECKS = 256
_SWEEP_FLAGS = frozenset({"-m", "--multirun"})


@dataclass
class _Command:
    """One command line's runs: what the preflight prepared (one per composed config), the
    trust flag taken out of it, and the summaries of the runs Hydra made (several under -m)."""

    trusted: bool = False
    prepared: list[Prepared] = field(default_factory=list)
    summaries: list[RunSummary] = field(default_factory=list)


def pinned_keys(overrides: Sequence[str]) -> frozenset[str]:
    """Plan/workload keys the user set on the command line: the search never changes them."""
    parsed = parse_overrides(overrides)
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
                    f"{did_you_mean(value, allowed)}"
                )


def preflight(argv: Sequence[str], trust_remote_code: bool = False) -> list[Prepared]:
    """Compose and check every run the arguments ask for (raise `IpuTuneError` on the first);
    the runs prepared (none when a flag means Hydra runs no task)."""
    if any(a.split("=")[0] in _NO_RUN_FLAGS for a in argv):
        return []
    quick = quick_compose(argv, cache_dir())
    if quick is not None:
        check_target_typed(quick.model._target_, list(argv), trust_remote_code)
        return [prepare(quick, _pinned({a.partition("=")[0] for a in argv}))]
    overrides = [a for a in argv if not a.startswith("-")]
    parsed = parse_overrides(overrides)
    multirun = bool(_SWEEP_FLAGS & set(argv))
    for o, raw in zip(parsed, overrides, strict=True):
        check_sweep(o, raw, multirun)
    _check_groups(parsed)
    choices = [
        [f"{raw.split('=', 1)[0]}={v}" for v in o.sweep_string_iterator()]
        if o.is_sweep_override()
        else [raw]
        for o, raw in zip(parsed, overrides, strict=True)
    ]
    prepared = []
    token = GIVEN_OVERRIDES.set(overrides)  # a refused value is echoed as typed
    try:
        for combo in itertools.islice(itertools.product(*choices), _MAX_SWEEP_CHECKS):
            cfg = compose(list(combo))
            check_target_typed(cfg.model._target_, list(combo), trust_remote_code)
            prepared.append(prepare(cfg, pinned_keys(list(combo))))
    finally:
        GIVEN_OVERRIDES.reset(token)
    check_shared_studies(prepared)
    return prepared


def _prepared(command: _Command, cfg: TuneConfig, pinned: frozenset[str]) -> Prepared:
    """The preflight's preparation of this run (so it is not prepared twice), else made."""
    found = next((p for p in command.prepared if p.cfg == cfg and p.pinned == pinned), None)
    return found or prepare(cfg, pinned)


def _start(prepared: Prepared) -> None:
    """What the run says before its trials (one line): the fields of an ipu_config.json read
    in that it does not simulate, and where they go; or why a Transformers model gets no
    optimum-graphcore files (its head, and the heads optimum runs)."""
    from ipu_tune.exports import ipu_config_note, optimum_note  # imports optuna

    cfg = prepared.cfg
    if cfg.plan.from_ipu_config:
        note = ipu_config_note(cfg)
    else:  # only a Transformers model is said to miss them: the zoo's never had them
        note = optimum_note(cfg.model) if hf_source(cfg.model) is not None else None
    if note:
        print(note, flush=True)


def _run_one(command: _Command, cfg: Any) -> None:
    """One config Hydra composed: run it, print its summary (exit 1 with one line on an error)."""
    from hydra.core.hydra_config import HydraConfig

    task = HydraConfig.get().overrides.task
    try:
        tune_cfg = typed(TuneConfig, cfg)
        # Checked here too: --config-dir skips the preflight.
        check_target_typed(tune_cfg.model._target_, task, command.trusted)
        pinned = pinned_keys(task)
        prepared = _prepared(command, tune_cfg, pinned)
        _start(prepared)
        summary = run(prepared, pinned)
    except IpuTuneError as exc:
        sys.exit(fail(str(exc), exc.fault))
    except Exception as exc:  # a full or read-only disk is one line; anything else is a bug
        sys.exit(fail_on_disk_error(exc))
    print(format_summary(summary, list(task)))
    command.summaries.append(summary)


def _hydra_app(command: _Command) -> Callable[[], None]:
    """The `@hydra.main` app of this command line (built on use: importing Hydra costs ~0.5 s)."""
    import hydra

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def app(cfg: Any) -> None:
        _run_one(command, cfg)

    return app


def _composed_once(prepared: list[Prepared], argv: Sequence[str]) -> bool:
    """A single run with no Hydra flag or `hydra.*` override: the preflight's composition and
    preparation are the run's (conf/config.yaml runs in `.`, writes no `.hydra/`, sets no
    logging), so Hydra need not compose it again (~1 s)."""
    return len(prepared) == 1 and not any(
        a.startswith("-") or a.lstrip("+~").startswith("hydra") for a in argv)


def _run_prepared(prepared: Prepared, argv: Sequence[str]) -> int:
    try:
        _start(prepared)
        summary = run(prepared, prepared.pinned)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    except Exception as exc:  # a full or read-only disk is one line; anything else is a bug
        return fail_on_disk_error(exc)
    # (SIGINT/SIGTERM arrive as KeyboardInterrupt and are reported by `__main__`: 130/143.)
    print(format_summary(summary, argv))
    return 0


def _run_hydra(command: _Command, printing: bool, argv: Sequence[str]) -> int:
    """The Hydra app; Hydra's own errors (composing with --config-dir, which the preflight
    leaves to Hydra) as one line and the usage exit code, not Hydra's lines and exit 1."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises them instead of printing them
    try:
        # Hydra reads only the package's conf/ and the --config-dir files checked before.
        with guarded_loads(CONF_DIR), _redacted_stdout(printing):
            _hydra_app(command)()
    except IpuTuneError as exc:  # a file no check has read (`guarded_loads`)
        return fail(str(exc), exc.fault)
    except (OmegaConfBaseException, HydraException) as exc:
        shape = composed_file_error(str(exc), argv)
        return fail(str(shape or hydra_error(exc, argv)))
    return 0


@contextlib.contextmanager
def _redacted_stdout(printing: bool) -> Iterator[None]:
    """What Hydra prints for `--cfg`, `--info`, `--help` (the composed config, a storage URL's
    password included) with every credential redacted, as every line of ipu-tune is; a run
    (`printing` false) prints its own, already redacted."""
    if not printing:
        yield
        return
    from ipu_tune.storage import redact

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            yield
    finally:
        sys.stdout.write(redact(out.getvalue()))


# Hydra's flags that shape what `--cfg` prints; without it Hydra ignores them and runs the
# whole study the user meant only to look at.
_CFG_ONLY_FLAGS = {"-p": "--package", "--package": "--package", "--resolve": "--resolve"}
# Flags after which Hydra prints and runs nothing (with them, the two above change nothing).
_PRINTS_ONLY = frozenset({"-c", "--cfg", "-i", "--info", "-h", "--help", "--hydra-help", "-sc",
                          "--shell-completion"})


def _check_cfg_flags(argv: Sequence[str]) -> None:
    given = {a.partition("=")[0] for a in argv}
    for flag in sorted(given & set(_CFG_ONLY_FLAGS)):
        # Hydra itself takes --resolve only beside --cfg or --help (a ValueError otherwise).
        companions = _PRINTS_ONLY if flag != "--resolve" else {"-c", "--cfg", "-h", "--help"}
        if not given & companions:
            raise IpuTuneError(f"{flag}: only with --cfg (it shapes what --cfg prints; "
                               "without it, Hydra ignores it or fails); allowed: --cfg job "
                               f"{_CFG_ONLY_FLAGS[flag]}{' model' if flag != '--resolve' else ''}")


def hydra_main(argv: Sequence[str]) -> int:
    try:
        argv, trusted = split_trust_flag(argv)
        if any(a.startswith("-") for a in argv):  # flags first: `x=1 -m` is a sweep too
            flags, overrides = split_hydra_args(argv)
            argv = [*flags, *overrides]
        check_side_doors(argv, trusted)  # only model._target_ names code; before Hydra runs
        _check_cfg_flags(argv)
        command = _Command(trusted, preflight(argv, trusted))
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    if _composed_once(command.prepared, argv):
        return _run_prepared(command.prepared[0], argv)
    sys.argv = [sys.argv[0], *argv]
    register()
    code = _run_hydra(command, bool(_PRINT_FLAGS & {a.partition("=")[0] for a in argv}), argv)
    if code:
        return code
    if {"-m", "--multirun"} & set(argv) and command.summaries:
        print(format_comparison(command.summaries))  # one table comparing the sweep's runs
    return 0
