"""Who runs a trial: host, PID and process start time (so a reused PID is not mistaken)."""

from __future__ import annotations

import os
import socket
from functools import cache

__all__ = ["is_alive_here", "this_worker"]


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # Field 22 (starttime) follows the parenthesised command name, which may hold spaces.
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@cache
def _host() -> str:
    return socket.gethostname()


def this_worker() -> str:
    pid = os.getpid()
    return f"{_host()}:{pid}:{_start_time(pid)}"


def is_alive_here(worker: str) -> bool | None:
    """True/False for a worker of this host; None when it ran elsewhere (cannot tell)."""
    host, _, rest = worker.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != _host() or not pid_text.isdigit():
        return None
    return _start_time(int(pid_text)) == start
