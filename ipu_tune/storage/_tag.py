"""A storage's export tag: the short name that keeps two storages' studies of one name apart
(`<name>@<tag>` export folders, `results@<tag>.db` tables), from the storage as the file it
opens or the server it reaches, never from its credentials."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ipu_tune._own_files import DEFAULT_JOURNAL, EXPORT_TAG_CHARS

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


# Query options that say how to log in or how to talk to a server, not which database it is:
# one database reached under two logins, drivers or TLS settings is one storage, one tag. Any
# other option (host, port, dbname, service, options=-c search_path=...) may name another
# server, database or schema, and stays in the identity: a tag split in two costs a second
# export folder, two storages sharing a tag would overwrite each other's exports.
_LOGIN_OPTIONS = frozenset({
    "user", "passfile", "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslcrldir",
    "sslcompression", "sslsni", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "gssencmode", "gsslib", "gssdelegation", "krbsrvname", "require_auth", "channel_binding",
    "requirepeer", "connect_timeout", "application_name", "fallback_application_name",
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
    "tcp_user_timeout", "client_encoding",
})
# A server's port when the URL names none: `host/db` and `host:5432/db` are one database.
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433,
                  "oracle": 1521}


def _identity(kind: str, location: str) -> str:
    """A storage as the file it opens, whatever path leads there (`runs/a.journal` from its
    folder and its absolute path are one journal, one tag); a server as the database it
    reaches (`_server`)."""
    if kind == "journal":
        return os.path.realpath(location)
    url = make_url(location)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return "sqlite:///" + os.path.realpath(str(url.database))
    return _server(url)


def _server(url: Any) -> str:
    """The backend, host, port and database of a server's `url`, and its query options that
    may name another one: never its user, password, driver (`+psycopg2`) or login options
    (`_LOGIN_OPTIONS`, any whose name holds "pass"), so the tag is the same under every login
    and no rule of redaction changes it."""
    backend = url.get_backend_name()
    port = url.port or _DEFAULT_PORTS.get(backend, "")
    options = sorted((name, value if isinstance(value, str) else ",".join(value))
                     for name, value in url.query.items()
                     if name.lower() not in _LOGIN_OPTIONS and "pass" not in name.lower())
    return json.dumps([backend, (url.host or "").lower(), port, url.database or "", options])
