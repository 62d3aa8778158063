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


def _secret(url: str) -> str:
    """The password of `url` as typed: from the login's `:` to the LAST `@` (the most that
    may be a password when a `@` is not percent-encoded)."""
    body = url.split("://", 1)[-1]  # the whole URL: a password may even hold a space
    at = body.rfind("@")
    return body[:max(at, 0)].partition(":")[2]


def _pieces(url: str) -> tuple[list[str], list[str]]:
    """(anywhere, bounded): the texts of `url`'s password a driver may echo. Anywhere: the
    password (also percent-decoded) and its parts between `@`, `/`, `:` and `!` of 3
    characters or more, masked
    wherever they appear (as ever: the export tag of a storage hashes its URL so redacted).
    Bounded: what a driver quotes besides (a part of the password it split as a host or a
    database, percent-decoded as it connects with it, however short), masked only where it
    stands alone between quotes or URL punctuation: `P` of `'P@127.0.0.1'`, not of
    `Postgres` nor a `1` of `127.0.0.1`."""
    secret = _secret(url)
    if not secret:
        return [], []
    raw = [secret, *re.split(r"[@/:!]", secret)]
    # The whole password decoded too: the text a driver that connects with it may quote.
    anywhere = [p for p in (*raw, unquote(secret)) if len(p) >= 3]
    forms = {secret, unquote(secret)}
    bounded = {p for f in forms for p in (f, *re.split(r"[@/:!?&=#;,]", f))} | set(raw)
    return (sorted(set(anywhere), key=len, reverse=True),
            sorted((p for p in bounded - set(anywhere) if p), key=len, reverse=True))


# A bounded piece stands alone: no letter, digit, `_`, `.`, `-`, `%` or space beside it (a
# word, a host name, an encoded byte or a sentence is never cut), or the text ends there.
_ALONE = r"(?<![\w.%\s-]){}(?![\w.%\s-])"


def redact(text: str, *urls: str) -> str:
    """`text` with every password replaced by ***: user:password@ of URLs that parse or not,
    of free text, and query parameters such as ?password=, &sslpassword=; also the passwords
    of `urls` and their pieces, as typed or percent-decoded (what a driver's message may
    quote in part). The one redaction used for messages, logs, exports and tables."""
    out = str(text)
    for url in urls:
        anywhere, bounded = _pieces(url)
        for piece in anywhere:
            out = out.replace(piece, "***")
        for piece in bounded:
            out = re.sub(_ALONE.format(re.escape(piece)), "***", out)
    out = _URL.sub(_url, out)
    out = _LOOSE.sub(lambda m: f"{m.group(1)}{m.group(2)}:***@", out)
    return _QUERY_PARAM.sub(_query_param, out)


def _query_param(match: re.Match[str]) -> str:
    name = unquote(match.group(2)).lower()
    if "pass" not in name:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}=***"
