"""Credentials out of every text that leaves the process: messages, tables, exports, logs.

A password may hold `/`, `@`, `!` or `:` (`postgresql://bob:b0b/SECRET@host/db` is a valid
login): a URL's user part ends at the LAST `@` of the URL, not the first `/`. Text that is no
URL (a lexer error echoing an override, a URL missing its `://`) is covered by a looser rule:
`name:anything@` is redacted wherever it appears. No imports: error paths use it freely.
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_URL = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s'\"]+)")
_LOOSE = re.compile(r"(?i)(^|[\s'\"=(,/])([^\s:/@'\"=(,]*):(?!//)(?!\*\*\*@)([^\s'\"]*)@")
# Any query parameter whose name contains "pass" (password, sslpassword, PASSWORD, passwd).
_QUERY_SECRET = re.compile(r"(?i)([?&;\s]|^)([a-z_]*pass(?:word|wd)?[a-z_]*)=([^&;\s'\"]*)")


def _url(match: re.Match[str]) -> str:
    scheme, body = match.group(1), match.group(2)
    at = body.rfind("@")
    user, colon, _ = body[:max(at, 0)].partition(":")
    if at < 0 or not colon:
        return match.group(0)
    return f"{scheme}{user}:***{body[at:]}"


def redact(text: str) -> str:
    """`text` with every password replaced by ***: user:password@ of URLs that parse or not,
    of free text, and query parameters such as ?password=, &sslpassword=. The one redaction
    used for messages, logs, exports and tables."""
    out = _URL.sub(_url, str(text))
    out = _LOOSE.sub(lambda m: f"{m.group(1)}{m.group(2)}:***@", out)
    return _QUERY_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}=***", out)
