"""The command a remedy is run with, as the summary, `explain` and the report print it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

__all__ = ["remedy_command"]


def remedy_command(overrides: Sequence[str], argv: Sequence[str] | None) -> str:
    """The command to paste for a remedy: the user's arguments with the remedy's overrides
    (replacing any the user gave for the same keys); without them, the overrides to add. A
    password among the arguments (`study.storage=postgresql://u:PW@h/db`) is printed as ***:
    the command is shown, not run, and the user has the password."""
    from ipu_tune.storage import redact

    quoted = [shlex.quote(o) for o in overrides]
    if argv is None:
        return redact("add to your command: " + " ".join(quoted))
    keys = {o.partition("=")[0] for o in overrides}
    kept = [shlex.quote(a) for a in argv if a.partition("=")[0].lstrip("+~") not in keys]
    return redact(" ".join(["python -m ipu_tune", *kept, *quoted]))
