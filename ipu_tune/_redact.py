"""Credentials out of every text that leaves the process: messages, tables, exports, logs.

A password may hold `/`, `@`, `!` or `:` (`postgresql://bob:b0b/SECRET@host/db` is a valid
login): a URL's user part ends at the LAST `@` of the URL, not the first `/`. Text that is no
URL (a lexer error echoing an override, a URL missing its `://`) is covered by a looser rule:
`name:anything@` is redacted wherever it appears. No imports of the package: error paths (the
messages of `ipu_tune.errors` too) use it freely.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from urllib.parse import unquote

__all__ = ["COMMAND_ARGS", "redact", "without_environment", "without_password"]

# The command's arguments (`ipu_tune.__main__` sets them), for `without_environment`.
COMMAND_ARGS: ContextVar[tuple[str, ...]] = ContextVar("command_args", default=())
_ENV_REFERENCE = re.compile(r"\$\{oc\.env:([^,}]+)")
# A variable's value is masked from this many characters: a shorter one ("1", "yes") is a
# fragment of the message's own words and numbers, and no secret.
_MIN_MASKED = 4

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


# A password is masked inside a word only from this many characters. A shorter one (`ion`,
# `failed`, `conn`) is a common fragment of the driver's own words: masked inside them it cut
# `connection` into `connect***` (nonsense, and a hint at the password) while hiding nothing,
# since a word of the message is the driver's text, not the password's. 8 characters is the
# length below which common English and libpq/psycopg message words mostly fall and from which
# a chance match becomes unlikely: at 8 or more an embedded match is taken as the password
# echoed inside something (a host `SECRETPW.example.com`), and masked.
_INSIDE_WORDS = 8


def _pieces(url: str) -> tuple[list[str], list[str], list[str]]:
    """(anywhere, token, alone): the texts of `url`'s password a driver may echo, longest
    first. Anywhere: those of `_INSIDE_WORDS` characters or more (the password, also
    percent-decoded, and its parts between `@`, `/`, `:` and `!`), masked wherever they
    appear. Token: the whole password, as typed and decoded, however short, masked where it
    stands as a token (`_TOKEN`: `failed` of `auth failed for` but not of `failedover`).
    Alone: what a driver quotes besides (a part of the password it split as a host or a
    database, as typed or decoded, however short), masked only where it stands alone between
    quotes or URL punctuation (`_ALONE`): `P` of `'P@127.0.0.1'`, not of `Postgres`, nor a
    `1` of `127.0.0.1` or of `(1 try)`."""
    secret = _secret(url)
    if not secret:
        return [], [], []
    forms = {secret, unquote(secret)}
    raw = [secret, *re.split(r"[@/:!]", secret)]
    parts = {p for f in forms for p in (f, *re.split(r"[@/:!?&=#;,]", f))} | set(raw)
    anywhere = {p for p in parts if len(p) >= _INSIDE_WORDS}
    token = {f for f in forms if f} - anywhere
    alone = {p for p in parts if p} - anywhere - token
    return _longest(anywhere), _longest(token), _longest(alone)


def _longest(found: set[str]) -> list[str]:
    """`found` longest first: a piece inside a longer one is masked with it, not in part."""
    return sorted(found, key=len, reverse=True)


# A token: no letter, digit, `_`, `.`, `-` or `%` beside it (a word, a host name or an encoded
# byte is never cut), or the text ends there; whitespace, quotes and URL punctuation bound it.
_TOKEN = r"(?<![\w.%-]){}(?![\w.%-])"
# A piece stands alone: bounded as a token, but not by whitespace: a part of a password is
# quoted by a driver as a host or a database, and a short one (`a`, `1`) bounded by spaces is a
# word of the sentence (`(1 try)`).
_ALONE = r"(?<![\w.%\s-]){}(?![\w.%\s-])"


def redact(text: str, *urls: str) -> str:
    """`text` with every password replaced by ***: user:password@ of URLs that parse or not,
    of free text, and query parameters such as ?password=, &sslpassword=; also the passwords
    of `urls` and their pieces, as typed or percent-decoded (what a driver's message may
    quote in part), without cutting the words around them (`_pieces`). The one redaction
    used for messages, logs, exports and tables."""
    out = str(text)
    for url in urls:
        anywhere, token, alone = _pieces(url)
        for piece in anywhere:
            out = out.replace(piece, "***")
        for piece in token:
            out = re.sub(_TOKEN.format(re.escape(piece)), "***", out)
        for piece in alone:
            out = re.sub(_ALONE.format(re.escape(piece)), "***", out)
    out = _URL.sub(_url, out)
    out = _LOOSE.sub(lambda m: f"{m.group(1)}{m.group(2)}:***@", out)
    return _QUERY_PARAM.sub(_query_param, out)


def _query_param(match: re.Match[str]) -> str:
    name = unquote(match.group(2)).lower()
    if "pass" not in name:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}=***"


def without_password(url: str) -> str:
    """`url` with no password at all, to be run as printed: its login's `:password` (up to the
    LAST `@`, as `redact` takes it) and every query parameter whose name holds "pass" left
    out. A masked `alice:***@` would be sent as the password `***` and refused by the server;
    without one, libpq reads it from `PGPASSWORD` or `~/.pgpass`. Not a URL: unchanged."""
    scheme, sep, body = url.partition("://")
    if not sep:
        return url
    at = body.rfind("@")
    user, colon, _ = body[:max(at, 0)].partition(":")
    if at >= 0 and colon:
        body = user + body[at:]
    where, question, query = body.partition("?")
    kept = [p for p in query.split("&") if "pass" not in unquote(p.partition("=")[0]).lower()]
    return f"{scheme}://{where}" + (f"{question}{'&'.join(kept)}" if any(kept) else "")


def without_environment(text: str) -> str:
    """`text` with the value of each variable the command's arguments read as `${oc.env:NAME}`
    shown as that reference where it stands as a refused value: a variable set to something
    its key refuses (a mistyped name may be a password's) is not echoed by the refusal."""
    for name in dict.fromkeys(_ENV_REFERENCE.findall(" ".join(COMMAND_ARGS.get()))):
        value = os.environ.get(name.strip(), "")
        if len(value) >= _MIN_MASKED:
            reference = f"${{oc.env:{name}}}"
            # Where it stands as the refused value (`key=VALUE`, `key='VALUE...'`), not where the
            # message's own words happen to equal it (`allowed: true or false` of B=true).
            text = re.sub(rf"(?<==)('?){re.escape(value)}(?!\w)",
                          r"\1" + reference.replace("\\", "\\\\"), text)
    return text
