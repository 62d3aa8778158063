"""Shared bits of the commands: the one-line error convention, output to a closed pipe,
disk-full errors and the trust flag."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import NoReturn

from ipu_tune._escape import printable as _printable
from ipu_tune.errors import (
    IpuTuneError,
    disk_fault,
    disk_hint,
    mentions_disk_fault,
    server_fault,
    shorten,
)
from ipu_tune.interrupts import OUTPUT_OUTCOME, REPORT_OUTCOME

__all__ = [
    "EXIT_FAULT",
    "EXIT_USAGE",
    "OUTPUT_OUTCOME",
    "REPORT_OUTCOME",
    "TRUST_HELP",
    "ArgumentParser",
    "aligned_lines",
    "check_target_typed",
    "disk_error",
    "fail",
    "fail_on_disk_error",
    "path_arg",
    "print_out",
    "printable",
    "split_trust_flag",
]

EXIT_USAGE = 2
EXIT_FAULT = 1
TRUST_HELP = (
    "run the model._target_ named in the file (code chosen by the file's author); without it "
    "such files are refused"
)
# What the interrupted line of a command that writes files (not trials) says: the writer
# (`ipu_tune.files`) leaves each file, and the exports as a set, old or new, never half.


def disk_error(exc: BaseException) -> str | None:
    """One line for a full/read-only disk anywhere in `exc` (also wrapped by SQLAlchemy), else
    None."""
    found = disk_fault(exc)
    return None if found is None else f"{found}; {disk_hint(found)}"


_TRUST_KEY = "trust_remote_code"
_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


def split_trust_flag(argv: Sequence[str]) -> tuple[list[str], bool]:
    """Take `trust_remote_code=true` (also with + or ++, or `--trust-remote-code`) out of the
    tuner's arguments: it is a decision of this run, not a key of the stored config."""
    rest: list[str] = []
    trusted = False
    for arg in argv:
        key, eq, value = arg.partition("=")
        if arg == "--trust-remote-code":
            trusted = True
        elif eq and key.lstrip("+") == _TRUST_KEY:
            if value.lower() not in _TRUE + _FALSE:
                raise IpuTuneError(f"{_TRUST_KEY}={value!r}: allowed: true, false")
            trusted = value.lower() in _TRUE
        else:
            rest.append(arg)
    return rest, trusted


def check_target_typed(target: str | None, overrides: Sequence[str], trusted: bool) -> None:
    """A `model._target_` typed on the command line is the user's choice; one that comes from a
    config file (a user config dir, a shared experiment) runs only with trust_remote_code=true."""
    if not target or trusted:
        return
    typed = [o.partition("=")[2] for o in overrides
             if o.partition("=")[0].lstrip("+~") == "model._target_"]
    # An interpolation (`model._target_=${model.name}`) takes its value from a config file.
    if not typed or "${" in typed[-1]:
        raise IpuTuneError(
            f"model._target_={target[:80]!r}: named in a config file, not on the command line; "
            f"code named in a file runs only with {_TRUST_KEY}=true"
        )


def fail_on_disk_error(exc: BaseException) -> int:
    """Call inside `except`: one line and exit 1 for a full/read-only disk or a database server
    that stopped answering (faults of the machine, not bugs), one line and exit 2 for a study's
    SQLite database found damaged (a file to restore, as a damaged results table is), else
    re-raise."""
    from ipu_tune.storage import damaged_database, redact

    damage = damaged_database(exc)
    if damage is not None:
        print("ipu-tune: error: " + printable(" ".join(damage.split())), file=sys.stderr)
        return EXIT_USAGE
    message = disk_error(exc)
    server = server_fault(exc) if message is None else None
    if server is not None:
        message = (f"{redact(server)}; the finished trials are stored; run the same command "
                   "again once the server answers, to resume")
    if message is None:
        raise exc
    print("ipu-tune: error: " + printable(" ".join(message.split())), file=sys.stderr)
    return EXIT_FAULT


def print_out(text: str) -> int:
    """Print to stdout, every line `printable` (what a stored study holds, such as a trial's
    bottleneck, cannot move the cursor, retitle or clear the terminal); a reader that closed the
    pipe (`| head`) ends the command quietly."""
    try:
        print("\n".join(map(_printable, text.split("\n"))))
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


def printable(text: object) -> str:
    """`text` with control characters escaped (`\x1b`, `\n`): a stored name (another user's
    study) must not move the cursor, recolour or forge lines of the terminal."""
    return _printable(text)


def fail(message: str, fault: bool = False) -> int:
    """Print `ipu-tune: error: <one line>` on stderr and return the usage exit code (`fault`:
    the fault code). Every line is redacted: a message may quote a storage URL (Hydra's lexer
    echoes overrides)."""
    from ipu_tune._redact import without_environment
    from ipu_tune.storage import redact

    message = without_environment(redact(str(message)))
    text = shorten(printable(" ".join(message.split())))  # redacted, then cut
    if mentions_disk_fault(text):  # wrapped in a message: still a full disk
        # The writer (`ipu_tune.files`) already says what to do: not twice.
        said = ("free space", "writable", "ulimit")
        hint = "" if any(s in text for s in said) else f"; {disk_hint(text)}"
        print("ipu-tune: error: " + text + hint, file=sys.stderr)
        return EXIT_FAULT
    print("ipu-tune: error: " + text, file=sys.stderr)
    return EXIT_FAULT if fault else EXIT_USAGE


def path_arg(text: str) -> str:
    """The `type` of a command's path argument: an empty one is refused, not read as the
    current folder (`Path("")` is `.`: evaluate's "config file '.'") or as the option left
    out (`calibrate --output ''` wrote no file after the whole fit)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: empty; allowed: a path of a file")
    return text


class ArgumentParser(argparse.ArgumentParser):
    """The commands' parser: a bad option is one `ipu-tune: error:` line naming the command,
    exit 2, as every other bad input (argparse prints its usage over several lines)."""

    def error(self, message: str) -> NoReturn:
        sys.exit(fail(f"{self.prog}: {message} (see {self.prog} --help)"))


def aligned_lines(columns: Sequence[str], rows: Sequence[Mapping[str, str]],
                  right: Collection[str], headers: Sequence[str] | None = None) -> list[str]:
    """A plain-text table, header first: the columns of figures (`right`) aligned right, the
    others (names) left, two spaces apart whatever their widths, no trailing blanks.
    `headers`: the header's words where they are not the columns' keys (two columns of one
    name)."""
    head = dict(zip(columns, headers or columns, strict=True))
    width = {c: max(len(head[c]), *(len(r[c]) for r in rows)) for c in columns}

    def line(cells: Mapping[str, str]) -> str:
        return "  ".join(cells[c].rjust(width[c]) if c in right else cells[c].ljust(width[c])
                         for c in columns).rstrip()

    return [line(head), *(line(r) for r in rows)]
