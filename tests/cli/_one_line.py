"""Running the command line in-process and reading how it ended: one line, an exit code."""

from __future__ import annotations

import pytest

from ipu_tune.__main__ import main


def exit_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr) of `python -m ipu_tune ARGV`; stderr must be at most one line and
    hold no traceback."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert isinstance(info.value.code, int)
    return info.value.code, err
