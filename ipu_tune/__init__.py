"""ipu-tune: find the IPU execution plan that fits and runs fastest."""

import sys as _sys

if _sys.argv[:1] == ["-m"] or _sys.argv[0].endswith("ipu-tune"):
    # Run as a command: SIGINT/SIGTERM are one line from the first import on, not a traceback.
    from ipu_tune.interrupts import install as _install

    _install()

from ipu_tune._api import evaluate, evaluate_config, profile
from ipu_tune.errors import IpuTuneError

__version__ = "0.1.0"

__all__ = ["IpuTuneError", "__version__", "evaluate", "evaluate_config", "profile"]
