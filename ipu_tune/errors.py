"""The one exception type users see.

User errors (bad config, unknown model, unreachable storage) raise `IpuTuneError` with a
one-line message naming the key, the value and what is allowed; faults of a run (a worker
killed) raise it with `fault=True`. Internal invariants use
`assert`; they are bugs, not user errors.
"""

from __future__ import annotations

__all__ = ["IpuTuneError", "bad_value"]


class IpuTuneError(ValueError):
    """A user-facing error whose message is a single line. `fault`: not the input's fault but
    the run's (a worker killed): the command line exits 1, not the bad-input code 2."""

    def __init__(self, message: str, fault: bool = False) -> None:
        super().__init__(" ".join(str(message).split()))
        self.fault = fault


def bad_value(key: str, value: object, allowed: str) -> IpuTuneError:
    """Build the canonical message: ``key=value: allowed``."""
    return IpuTuneError(f"{key}={value!r}: {allowed}")
