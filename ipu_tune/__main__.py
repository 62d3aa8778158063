"""`python -m ipu_tune` / `ipu-tune`: tune (Hydra overrides) or run a named command."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

__all__ = ["main"]


def _commands() -> dict[str, Callable[[Sequence[str]], int]]:
    import ipu_tune.cli.compare_cmd as compare_cmd
    import ipu_tune.cli.evaluate_cmd as evaluate_cmd
    import ipu_tune.cli.explain_cmd as explain_cmd
    import ipu_tune.cli.profile_cmd as profile_cmd
    import ipu_tune.cli.studies_cmd as studies_cmd

    commands: dict[str, Callable[[Sequence[str]], int]] = {
        "evaluate": evaluate_cmd.main,
        "profile": profile_cmd.main,
        "studies": studies_cmd.list_main,
        "report": studies_cmd.report_main,
        "export": studies_cmd.export_main,
        "explain": explain_cmd.main,
        "trials": studies_cmd.trials_main,
        "compare": compare_cmd.main,
    }
    import ipu_tune.cli.calibrate_cmd as calibrate_cmd

    commands["calibrate"] = calibrate_cmd.main
    return commands


COMMAND_NAMES = ("evaluate", "profile", "studies", "report", "export", "calibrate", "explain",
                 "trials", "compare")


def _dispatch(args: list[str]) -> int:
    if args and args[0] in COMMAND_NAMES:
        return _commands()[args[0]](args[1:])
    from ipu_tune.cli.run import hydra_main

    return hydra_main(args)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = _dispatch(args)
    except BrokenPipeError:
        # The reader went away (`| head`): end quietly as Unix tools do; the exit-time flush of
        # stdout must not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except OSError as exc:  # a full or read-only disk outside the commands' own handling
        from ipu_tune.cli import fail_on_disk_error

        code = fail_on_disk_error(exc)
    sys.exit(code)


if __name__ == "__main__":
    main()
