"""Credentials out of every text that leaves the process: messages, tables, exports, logs.

A password may hold `/`, `@`, `!` or `:` (`postgresql://bob:b0b/SECRET@host/db` is a valid
login): a URL's user part ends at the LAST `@` of the URL, not the first `/`. Text that is no
URL (a lexer error echoing an override, a URL missing its `://`) is covered by a looser rule:
`name:anything@` is redacted wherever it appears. No imports of the package: error paths (the
messages of `ipu_tune.errors` too) use it freely.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["redact"]

_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s'\"]+)")
_LOOSE = re.compile(r"(?i)(^|[\s'\"=(,/])([^\s:/@'\"=(,]*):(?!//)(?!\*\*\*@)([^\s'\"]*)@")
# Any query parameter whose name contains "pass" (password, sslpassword, PASSWORD, passwd),
# also percent-encoded (`?%70assword=`: SQLAlchemy and libpq decode names as they do values).
_QUERY_PARAM = re.compile(r"(?i)([?&;\s]|^)([a-z0-9_%]+)=([^&;\s'\"]*)")


def _url(match: re.Match[str]) -> str:
    scheme, body = match.group(1), match.group(2)
    at = body.rfind("@")
    user, colon, _ = body[:max(at, 0)].partition(":")
    if at < 0 or not colon:
        return match.group(0)
    return f"{scheme}{user}:***{body[at:]}"


def _pieces(url: str) -> list[str]:
    """The password of `url` and its parts between `@`, `/`, `:` and `!` (a driver that splits
    the URL elsewhere quotes such a part as a host name or a database)."""
    body = url.split("://", 1)[-1]  # the whole URL: a password may even hold a space
    at = body.rfind("@")
    secret = body[:max(at, 0)].partition(":")[2]
    parts = [secret, *re.split(r"[@/:!]", secret)] if secret else []
    return sorted((p for p in parts if len(p) >= 3), key=len, reverse=True)


def redact(text: str, *urls: str) -> str:
    """`text` with every password replaced by ***: user:password@ of URLs that parse or not,
    of free text, and query parameters such as ?password=, &sslpassword=; also any piece of
    the passwords of `urls` (the URLs a driver's message may quote in part). The one
    redaction used for messages, logs, exports and tables."""
    out = str(text)
    for url in urls:
        for piece in _pieces(url):
            out = out.replace(piece, "***")
    out = _URL.sub(_url, out)
    out = _LOOSE.sub(lambda m: f"{m.group(1)}{m.group(2)}:***@", out)
    return _QUERY_PARAM.sub(_query_param, out)


def _query_param(match: re.Match[str]) -> str:
    name = unquote(match.group(2)).lower()
    if "pass" not in name:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}=***"
