"""Write the framework exports of a best plan beside best.yaml."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.config import EvalConfig
from ipu_tune.models import ModelProfile
from ipu_tune.simulator import SimResult

from ._export import atomic_write
from ._popart import popart_snippet
from ._poptorch import poptorch_snippet
from ._tf import tf_snippet

__all__ = ["EXPORT_FILES", "write_exports"]

# Summary key -> file name beside best.yaml.
EXPORT_FILES = {
    "poptorch": "poptorch_options.py",
    "popart": "popart_options.py",
    "tensorflow": "tf_ipu_config.py",
}


def write_exports(
    out_dir: Path,
    cfg: EvalConfig,
    result: SimResult | None = None,
    profile: ModelProfile | None = None,
    root: str | Path | None = None,
) -> dict[str, Path]:
    """Write the PopTorch, PopART and TensorFlow programs of `cfg` (under `root` when given,
    see `atomic_write`); returns key -> path."""
    sources = {
        "poptorch": poptorch_snippet(cfg, result, profile),
        "popart": popart_snippet(cfg, result),
        "tensorflow": tf_snippet(cfg, result),
    }
    return {key: atomic_write(out_dir / EXPORT_FILES[key], text, root)
            for key, text in sources.items()}
