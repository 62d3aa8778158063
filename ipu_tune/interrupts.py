"""SIGINT and SIGTERM on the command line: one line, exit 130/143, never a traceback.

Installed first thing when ipu-tune runs as a command (before its heavy imports), by
`ipu_tune/__init__.py` and `ipu_tune.__main__`; a library user's process is left alone.

Two phases. While the run has written nothing (imports, composing, profiling), a signal ends
the process at once. Once the tuner writes to its storage (`defer()`), a signal only marks the
run as stopping: the trial in progress finishes and is stored, no new one starts, exports are
skipped (those already written are whole: they are atomic), and `check()` raises `Interrupted`
at the next safe point. A second signal ends the process at once (a trial it leaves RUNNING is
failed and retried by the next run). Worker processes get the signal too: from the terminal
(same process group), forwarded by the parent, or, when the parent is SIGKILLed, from the
kernel (`PR_SET_PDEATHSIG`).

Writing files (`held()`, see `ipu_tune.files`), a signal does not end the process at once: it
raises `Interrupted` between two files, so the writer's `finally` removes its temporary files,
or after the renames that put a set of files in place, so the set is never mixed. `outcome()`
words what the interrupted line says was kept (trials for the tuner; whole files for report,
export and calibrate).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

__all__ = [
    "COMMAND_OUTCOMES",
    "OUTPUT_OUTCOME",
    "READ_OUTCOME",
    "REPORT_OUTCOME",
    "TUNE_OUTCOME",
    "Interrupted",
    "add_child",
    "check",
    "defer",
    "exit_code",
    "finish",
    "held",
    "install",
    "interrupted_line",
    "outcome",
    "pending",
    "report",
    "stop_if_held",
    "worker_process",
]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class Interrupted(KeyboardInterrupt):
    """Raised at a safe point after SIGINT/SIGTERM (a BaseException: `except Exception` in
    library code does not swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


TUNE_OUTCOME = "finished trials are kept, run the same command again to resume"
READ_OUTCOME = "the command only reads, nothing of it is left half-done; run it again"
REPORT_OUTCOME = ("the exports and report.html on disk are whole, all old or all new; run the "
                  "same command again to rebuild them")
OUTPUT_OUTCOME = ("--output is unchanged or whole, never half-written; run the same command "
                  "again to write it")
# What each subcommand's interrupted line says (`install`); any other argument: the tuner's.
# The reading commands fill only caches, written whole or not at all.
COMMAND_OUTCOMES = {
    "report": REPORT_OUTCOME, "export": OUTPUT_OUTCOME, "calibrate": OUTPUT_OUTCOME,
    **dict.fromkeys(("evaluate", "profile", "studies", "explain", "trials", "compare"),
                    READ_OUTCOME),
}


class _State:
    installed = False
    deferred = False
    worker = False  # a worker process: never escalates on a repeated signal
    pending: int | None = None
    children: list[int] = []  # noqa: RUF012  (worker PIDs the parent forwards signals to)
    holding = 0  # depth of `held()`: a signal waits for a point where files are whole
    held: int | None = None  # the signal that arrived while holding
    outcome = TUNE_OUTCOME


def exit_code(signum: int) -> int:
    return 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def interrupted_line(signum: int) -> str:
    name = signal.Signals(signum).name
    return f"ipu-tune: interrupted by {name}; {_State.outcome}"


def outcome(text: str) -> None:
    """What the interrupted line says is kept and what to do (a command that writes files, not
    trials, says so: `report`, `export`, `calibrate`)."""
    _State.outcome = text


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Files being written: a signal waits for the next `stop_if_held()` (between two files,
    where the writer's `finally` removes its temporaries) or for the end of the block (after
    the last rename of a set), then raises `Interrupted`; never in between, where a temporary
    could be made but not yet known to the writer."""
    _State.holding += 1
    try:
        yield
    except BaseException:
        _State.holding -= 1
        if not _State.holding:
            _State.held = None  # the command ends with this error (a fault, or the signal)
        raise
    _State.holding -= 1
    if not _State.holding:
        stop_if_held()


def stop_if_held() -> None:
    """Raise `Interrupted` for a signal that arrived during `held()`."""
    signum, _State.held = _State.held, None
    if signum is not None:
        _forward(signum)
        raise Interrupted(signum)


def _exit_now(signum: int) -> None:
    try:
        os.write(2, (interrupted_line(signum) + "\n").encode())
    finally:
        os._exit(exit_code(signum))


def _forward(signum: int) -> None:
    for pid in _State.children:
        with contextlib.suppress(OSError):  # already gone
            os.kill(pid, signum)


def _handler(signum: int, frame: FrameType | None) -> None:
    del frame
    if _State.holding:
        _State.held = _State.held or signum
        return
    if _State.worker:
        if _State.pending is None:
            _State.pending = signum
        return
    if not _State.deferred or _State.pending is not None:
        _forward(signal.SIGKILL if _State.pending is not None else signum)
        _exit_now(signum)
    _State.pending = signum
    _forward(signum)


def install(command: str | None = None) -> None:
    """Handle SIGINT/SIGTERM from now on (idempotent; main thread only); `command`: the first
    argument, whose interrupted line (`COMMAND_OUTCOMES`) holds from the first import on."""
    if command in COMMAND_OUTCOMES:
        _State.outcome = COMMAND_OUTCOMES[command]
    if _State.installed:
        return
    for sig in _SIGNALS:
        signal.signal(sig, _handler)
    _State.installed = True


def defer() -> None:
    """From now on a signal stops the run at the next `check()` (the run writes state)."""
    _State.deferred = True


def pending() -> int | None:
    return _State.pending


def check() -> None:
    """Raise `Interrupted` if a signal arrived (call between trials and before exports)."""
    if _State.pending is not None:
        raise Interrupted(_State.pending)


def add_child(pid: int) -> None:
    _State.children.append(pid)


def worker_process() -> None:
    """In a forked worker: stop with the parent, even one that was SIGKILLed."""
    _State.children = []
    _State.worker = True
    _State.deferred = True
    if _State.installed and sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def finish() -> None:
    """The command has written and printed all it will: SIGINT/SIGTERM are ignored for the
    interpreter's shutdown, where CPython puts its handlers' signals back to the default (a
    signal there would end the process by the signal, with no line and no exit code of ours;
    it leaves an ignored one alone). The process ends with its own code: nothing is left to
    stop. Ignored, not blocked: a mask is per thread, and other threads may still run."""
    if _State.installed:
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def report(exc: KeyboardInterrupt) -> int:
    """One line on stderr for an interrupt that reached the top; returns the exit code."""
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    print(interrupted_line(signum), file=sys.stderr)
    return exit_code(signum)
