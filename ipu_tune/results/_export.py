"""Exports of a study's best plan: best.yaml, the PopTorch snippet, the report, the table."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ipu_tune.errors import IpuTuneError

__all__ = ["atomic_write", "best_yaml_text", "export_table"]


def atomic_write(path: Path, text: str | bytes) -> Path:
    """Write via a temporary file and `os.replace`, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; exports are for everyone
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def best_yaml_text(config: Mapping[str, Any], provenance: Mapping[str, Any]) -> str:
    """The DESIGN.md schema (model/workload/system/plan) plus an `ipu_tune:` provenance block.

    `ipu_tune.evaluate` ignores the provenance block, so the file evaluates again unchanged.
    """
    header = (
        f"# ipu-tune best plan of study {provenance.get('study')!s}, trial "
        f"{provenance.get('trial')!s}.\n"
        f"# Evaluate it again with: {provenance.get('evaluate')!s}\n"
    )
    body = {k: config[k] for k in ("model", "workload", "system", "plan")}
    text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None)
    text += yaml.safe_dump({"ipu_tune": dict(provenance)}, sort_keys=False)
    return header + text


def export_table(frame: Any, path: Path) -> Path:
    """Write the results table as Parquet or CSV, chosen by the file suffix."""
    if path.suffix == ".parquet":
        import io

        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return atomic_write(path, buf.getvalue())
    if path.suffix == ".csv":
        return atomic_write(path, frame.to_csv(index=False))
    raise IpuTuneError(f"--output={str(path)!r}: allowed suffixes: .parquet, .csv")
