"""The one exception type users see.

User errors (bad config, unknown model, unreachable storage) raise `IpuTuneError` with a
one-line message naming the key, the value and what is allowed; faults of a run (a worker
killed) raise it with `fault=True`. Internal invariants use
`assert`; they are bugs, not user errors.
"""

from __future__ import annotations

import re

from ipu_tune._redact import redact

__all__ = ["MAX_SHOWN", "IpuTuneError", "bad_value", "shorten", "shown"]

# A value echoed in a message is cut in its middle past this many characters, so that the
# message stays one readable line whatever was given (a path of 5,000 characters, a list of
# 50,000 layers); its start and end stay, the two parts a typo is usually found in.
MAX_SHOWN = 200
_LONG_WORD = re.compile(rf"\S{{{MAX_SHOWN + 1},}}")


class IpuTuneError(ValueError):
    """A user-facing error whose message is a single line. `fault`: not the input's fault but
    the run's (a worker killed): the command line exits 1, not the bad-input code 2."""

    def __init__(self, message: str, fault: bool = False) -> None:
        super().__init__(" ".join(str(message).split()))
        self.fault = fault


def _cut(text: str) -> str:
    """`text` cut in its middle past `MAX_SHOWN` characters. Passwords are masked first: a cut
    through a URL would leave a part of its password that no later redaction recognises."""
    if len(text) <= MAX_SHOWN:
        return text
    text = redact(text)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:150]}...({len(text) - 190} characters)...{text[-40:]}"


def shown(value: object) -> str:
    """`repr(value)`, cut in its middle past `MAX_SHOWN` characters."""
    return _cut(repr(value))


def shorten(text: str) -> str:
    """`text` with every run of more than `MAX_SHOWN` non-blank characters cut in its middle
    (the printed line of any message: a long path or override is one such run)."""
    return _LONG_WORD.sub(lambda m: _cut(m.group(0)), text)


def bad_value(key: str, value: object, allowed: str) -> IpuTuneError:
    """Build the canonical message: ``key=value: allowed`` (a long value cut, `shown`)."""
    return IpuTuneError(f"{key}={shown(value)}: {allowed}")
