"""ipu-tune: find the IPU execution plan that fits and runs fastest."""

from ipu_tune._api import evaluate, evaluate_config, profile
from ipu_tune.errors import IpuTuneError

__version__ = "0.1.0"

__all__ = ["IpuTuneError", "__version__", "evaluate", "evaluate_config", "profile"]
