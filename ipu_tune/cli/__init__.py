"""The command line: the Hydra main command and the subcommands (evaluate, studies, ...)."""

from ipu_tune.cli._common import fail_on_disk_error

__all__ = ["fail_on_disk_error"]
