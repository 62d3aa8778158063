"""`python -m ipu_tune` / `ipu-tune`: tune (Hydra overrides) or run a named command.

Start-up matters here: only the command that runs is imported, and `--help` is our
own text (Hydra's help builds its config repository dozens of times; it stays behind
`--hydra-help`). Nothing heavy (Hydra, Optuna, torch, pandas, plotly) is imported to print it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence


def _masked_title() -> None:
    """The process title (`ps`, /proc/PID/cmdline: anyone on the machine reads it) with every
    password of the command line masked (`postgresql://user:***@host/db`), as early as the
    command can: before any import of the command, before workers are forked (they inherit
    it). Until Python runs this the kernel shows the command as typed: a URL without a
    password, and libpq's PGPASSWORD or ~/.pgpass, keeps it out of the title altogether."""
    from setproctitle import getproctitle, setproctitle

    from ipu_tune._redact import redact

    title = getproctitle()
    masked = redact(title)
    if masked != title:
        setproctitle(masked)


if __name__ == "__main__":  # `python -m ipu_tune`: before anything else is imported
    _masked_title()

from ipu_tune import interrupts  # noqa: E402
from ipu_tune._redact import COMMAND_ARGS  # noqa: E402

interrupts.install()  # before anything slow: Ctrl-C during start-up is one line

__all__ = ["COMMAND_NAMES", "main", "usage"]

# name -> (module, function, one-line description); a module is imported only when it runs.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "evaluate": ("ipu_tune.cli.evaluate_cmd", "main",
                 "simulate one plan: a YAML of the config schema, e.g. an exported best.yaml"),
    "profile": ("ipu_tune.cli.profile_cmd", "main",
                "per-block profile of a model (parameters, FLOPs, activations)"),
    "studies": ("ipu_tune.cli.studies_cmd", "list_main", "list the stored studies"),
    "report": ("ipu_tune.cli.studies_cmd", "report_main",
               "rebuild best.yaml, the snippet and report.html of a stored study"),
    "export": ("ipu_tune.cli.studies_cmd", "export_main",
               "export a study's results table to Parquet or CSV"),
    "calibrate": ("ipu_tune.cli.calibrate_cmd", "main",
                  "refit the simulator's constants to measured runs"),
    "explain": ("ipu_tune.cli.explain_cmd", "main",
                "the optimisation ladder from your plan to the study's best, one change a step"),
    "trials": ("ipu_tune.cli.studies_cmd", "trials_main",
               "a study's trials: top N, filters, sort by any column"),
    "compare": ("ipu_tune.cli.compare_cmd", "main",
                "two plans side by side: plan, memory by category, time by phase"),
}
COMMAND_NAMES = tuple(_COMMANDS)


def _command(name: str) -> Callable[[Sequence[str]], int]:
    module, function, _ = _COMMANDS[name]
    found: Callable[[Sequence[str]], int] = getattr(importlib.import_module(module), function)
    return found


def usage() -> str:
    """The text of `ipu-tune --help`: commands, config groups and the main settings."""
    from ipu_tune.config import GROUPS, StudyConfig, group_options

    study = StudyConfig()
    lines = [
        "usage: ipu-tune [KEY=VALUE ...]          tune (or resume) a study; -m sweeps "
        "comma-separated values",
        "       ipu-tune COMMAND [ARGS ...]       (ipu-tune COMMAND --help for its options)",
        "",
        "commands:",
        *(f"  {name:10} {desc}" for name, (_, _, desc) in _COMMANDS.items()),
        "",
        "config groups (KEY=OPTION):",
        *(f"  {('+' if g == 'experiment' else '') + g:12} {', '.join(group_options(g))}"
          for g in GROUPS),
        "",
        "main settings (defaults in brackets):",
        f"  study.name=NAME             [{study.name or '<model>-<ipu>x<num_ipus>-<search>'}]",
        "  study.storage=URL           journal file, sqlite:///FILE or postgresql://... "
        "[<results_dir>/ipu_tune.journal]",
        f"  study.n_trials=N            finished trials the study should reach [{study.n_trials}]",
        f"  study.workers=N             worker processes on this machine [{study.workers}]",
        "  study.timeout_s=SECONDS     stop this run after SECONDS [none]",
        f"  study.progress_bar=BOOL     [{str(study.progress_bar).lower()}]",
        "  results_dir=DIR             where studies, exports and reports go [results]",
        "  +model.kwargs.NAME=VALUE    keyword argument of the model factory",
        "  model._target_=PKG.MOD.FN   your own torch.nn.Module factory",
        "  system.num_ipus=N  system.hosts=N  workload.micro_batch_size=N  plan.KNOB=VALUE",
        "                              a plan/workload key set here is pinned (never searched)",
        "",
        "examples:",
        "  ipu-tune model=bert_base system.num_ipus=4 study.n_trials=200",
        "  ipu-tune -m system.num_ipus=2,4 study.n_trials=50",
        "  ipu-tune evaluate results/<study>/best.yaml",
        "",
        "Hydra's own help: ipu-tune --hydra-help",
    ]
    return "\n".join(lines)


def _dispatch(args: list[str]) -> int:
    if args and args[0] in _COMMANDS:
        return _command(args[0])(args[1:])
    if args and args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if sys.stderr.isatty():  # something within a second of any start (the bar comes later)
        print("ipu-tune: composing the config and preparing the study ...", file=sys.stderr)
    from ipu_tune.cli.run import hydra_main

    code = hydra_main(args)
    interrupts.check()  # a signal during the last, deferred steps
    return code


def _one_line_warnings() -> None:
    """A library's warning (Optuna deprecating a sampler argument) as one line, once. Python
    shows the library's file and source line, and again each time a filter is changed, as
    Optuna's calls are wrapped in `warnings.catch_warnings`."""
    import warnings

    from ipu_tune._redact import redact

    seen: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        text = redact(" ".join(str(message).split()))
        if text not in seen:
            seen.add(text)
            print(f"ipu-tune: warning: {text} ({category.__name__})", file=sys.stderr)

    warnings.showwarning = show


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    interrupts.install(args[0] if args else None)  # its line, as `ipu_tune/__init__.py` set
    if argv is None:  # the process is this command: its title and stderr are ours
        _masked_title()
        _one_line_warnings()
    try:
        _main(args)
    finally:  # every way out, Hydra's own sys.exit included
        if argv is None:  # the process is this command (a caller of main(argv) lives on)
            interrupts.finish()


def _main(args: list[str]) -> None:
    COMMAND_ARGS.set(tuple(args))  # a message masks what `${oc.env:NAME}` resolved to
    try:
        code = _dispatch(args)
    except KeyboardInterrupt as exc:  # SIGINT/SIGTERM: one line, 130/143
        code = interrupts.report(exc)
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly as Unix tools do; the exit-time flush of
        # stdout must not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except RecursionError:
        # Optuna copies a study's attributes (`copy.deepcopy`) on every read: a value nested
        # deeper than Python recurses, which only a record edited by hand holds, fails there.
        print("ipu-tune: error: a stored value nests deeper than Python can copy "
              "(RecursionError), as only a study edited by hand holds; allowed: values nested "
              "at most a few hundred levels (delete or restore that study)", file=sys.stderr)
        code = 2
    except Exception as exc:  # a full disk or a lost server outside the commands' handling
        from ipu_tune.cli import fail_on_disk_error

        code = fail_on_disk_error(exc)
    sys.exit(code)


if __name__ == "__main__":
    main()
