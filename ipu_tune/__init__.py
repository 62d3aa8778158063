"""ipu-tune: find the IPU execution plan that fits and runs fastest."""

import sys as _sys

if _sys.argv[:1] == ["-m"] or _sys.argv[0].endswith("ipu-tune"):
    # Run as a command: SIGINT/SIGTERM are one line from the first import on, not a traceback.
    from ipu_tune.interrupts import install as _install

    _install(_sys.argv[1] if len(_sys.argv) > 1 else None)

from typing import TYPE_CHECKING, Any

from ipu_tune.errors import IpuTuneError

__version__ = "0.1.0"

__all__ = ["IpuTuneError", "__version__", "evaluate", "evaluate_config", "profile"]

if TYPE_CHECKING:
    from ipu_tune._api import evaluate, evaluate_config, profile

_API = ("evaluate", "evaluate_config", "profile")


def __getattr__(name: str) -> Any:
    # The API (and the simulator behind it) loads on first use, so that `python -m ipu_tune
    # --help` or `studies` do not pay for it.
    if name in _API:
        from ipu_tune import _api

        value = getattr(_api, name)
        globals()[name] = value  # later reads find it without this hook (once per call)
        return value
    raise AttributeError(f"module 'ipu_tune' has no attribute {name!r}")
