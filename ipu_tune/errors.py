"""The one exception type users see.

User errors (bad config, unknown model, unreachable storage) raise `IpuTuneError` with a
one-line message naming the key, the value and what is allowed. Internal invariants use
`assert`; they are bugs, not user errors.
"""

from __future__ import annotations

__all__ = ["IpuTuneError", "bad_value"]


class IpuTuneError(ValueError):
    """A user-facing error whose message is a single line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def bad_value(key: str, value: object, allowed: str) -> IpuTuneError:
    """Build the canonical message: ``key=value: allowed``."""
    return IpuTuneError(f"{key}={value!r}: {allowed}")
