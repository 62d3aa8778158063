"""A storage's export tag: the short name that keeps two storages' studies of one name apart
(`<name>@<tag>` export folders, `results@<tag>.db` tables), from the storage as the file it
opens or the server it reaches, never from its credentials."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ipu_tune._own_files import DEFAULT_JOURNAL, EXPORT_TAG_CHARS
from ipu_tune._redact import redact

__all__ = ["MEMORY", "export_tag", "make_url"]

MEMORY = "memory"  # study.storage=memory: a study in this process only, never resumed


def make_url(text: str) -> Any:
    """SQLAlchemy's URL of `text` (ValueError when it is not one). SQLAlchemy (~0.4 s) loads
    here, not at import: the journal storage and `ipu-tune studies` never need it."""
    from sqlalchemy.engine import make_url as sa_make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return sa_make_url(text)
    except ArgumentError as exc:
        raise ValueError(str(exc)) from None


def export_tag(kind: str, location: str, results_dir: str) -> str:
    """`StorageTarget.export_tag` of a storage: empty for the default journal."""
    if kind == "journal" and results_dir and Path(location).resolve() == (
            Path(results_dir) / DEFAULT_JOURNAL).resolve():
        return ""
    if kind == "memory":
        return MEMORY
    return hashlib.sha256(_identity(kind, location).encode()).hexdigest()[:EXPORT_TAG_CHARS]


def _identity(kind: str, location: str) -> str:
    """A storage as the file it opens, whatever path leads there (`runs/a.journal` from its
    folder and its absolute path are one journal, one tag); a server's URL without its
    credentials."""
    if kind == "journal":
        return os.path.realpath(location)
    url = make_url(location)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return "sqlite:///" + os.path.realpath(str(url.database))
    return redact(location, location)
