"""Exports of a study's best plan: best.yaml, the PopTorch snippet, the report, the table."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ipu_tune.config import check_name
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import KNOBS

__all__ = ["atomic_write", "best_yaml_text", "export_table", "study_dir", "typed_table"]

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _inside(path: Path, root: Path) -> bool:
    # Resolve both (symlinks, ..) and compare: the only test that a name cannot fool.
    return path.resolve().is_relative_to(root.resolve())


def study_dir(results_dir: str | Path, study_name: str) -> Path:
    """`<results_dir>/<study_name>`, refused with one line unless the name is a safe directory
    name and the folder resolves under results_dir (a stored study may predate the checks)."""
    check_name("study.name", study_name)
    root = Path(results_dir)
    out = root / study_name
    if not _inside(out, root):
        raise IpuTuneError(f"study.name={study_name!r}: resolves outside results_dir={str(root)!r}")
    return out


def atomic_write(path: Path, text: str | bytes, root: str | Path | None = None) -> Path:
    """Write via a temporary file and `os.replace`, so readers never see half a file.

    With `root`, `path` must resolve under it (exports stay under results_dir). Any OSError
    (full disk, read-only place, a directory in the way, /proc) is one line, and the temporary
    file is removed, so nothing is half-written.
    """
    path = Path(path)
    if root is not None and not _inside(path, Path(root)):
        raise IpuTuneError(
            f"export path {str(path)!r}: resolves outside results_dir={str(root)!r}")
    data = text.encode() if isinstance(text, str) else text
    tmp: str | None = None
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; exports are for everyone
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        hint = "; free space and run the same command again" if exc.errno in _DISK_FULL else ""
        raise IpuTuneError(
            f"{str(path)!r}: cannot be written ({exc.strerror or type(exc).__name__}){hint}"
        ) from None
    except BaseException:
        if tmp is not None:
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


# Store columns held as JSON text (lists) and ISO 8601 text (times) in the SQL table.
_LIST_COLUMNS = ("values", "memory_per_ipu", *(k.column for k in KNOBS if k.sql == "json"))
_TIME_COLUMNS = ("started_at", "finished_at")


def _from_json(text: Any) -> Any:
    return json.loads(text) if isinstance(text, str) else None


def typed_table(frame: Any) -> Any:
    """The results table with lists as lists and times as timestamps (not their text)."""
    import pandas as pd

    out = frame.copy()
    for name in _LIST_COLUMNS:
        if name in out.columns:
            out[name] = out[name].map(_from_json)
    for name in _TIME_COLUMNS:
        if name in out.columns:
            # Optuna records naive local times: they stay naive (no invented offset).
            out[name] = pd.to_datetime(out[name], format="ISO8601")
    if "extra" in out.columns:  # free-form JSON: one text column, whatever its keys
        out["extra"] = out["extra"].map(lambda v: None if v is None else json.dumps(v))
    return out


def export_table(frame: Any, path: Path) -> Path:
    """Write the results table as Parquet or CSV, chosen by the file suffix.

    Parquet keeps the types: list columns as lists, times as timestamps. CSV has no types, so
    lists are written as JSON arrays and times in ISO 8601.
    """
    if path.suffix == ".parquet":
        import io

        buf = io.BytesIO()
        typed_table(frame).to_parquet(buf, index=False)
        return atomic_write(path, buf.getvalue())
    if path.suffix == ".csv":
        table = typed_table(frame)
        for name in _LIST_COLUMNS:
            if name in table.columns:
                table[name] = table[name].map(lambda v: None if v is None else json.dumps(v))
        return atomic_write(path, table.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S.%f"))
    raise IpuTuneError(f"--output={str(path)!r}: allowed suffixes: .parquet, .csv")
