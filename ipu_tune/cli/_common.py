"""Shared bits of the commands: the one-line error convention."""

from __future__ import annotations

import sys

__all__ = ["EXIT_USAGE", "fail"]

EXIT_USAGE = 2


def fail(message: str) -> int:
    """Print `ipu-tune: error: <one line>` on stderr and return the usage exit code."""
    print("ipu-tune: error: " + " ".join(str(message).split()), file=sys.stderr)
    return EXIT_USAGE
