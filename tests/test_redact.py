"""Redaction (`ipu_tune._redact`): a URL's password is masked in every form a driver may echo,
as typed or percent-decoded, however short, and the text around it is left readable."""

from __future__ import annotations

import pytest

from ipu_tune._redact import redact

_PORT = 5432


@pytest.mark.parametrize(("url", "echo", "secrets"), [
    # A bare `@` splits the password: the driver quotes its tail as a host.
    (f"postgresql://postgres:S3cr3t@P@127.0.0.1:{_PORT}/tune",
     "failed to resolve host 'P@127.0.0.1': [Errno -2] Name or service not known", ["P"]),
    # libpq decodes the option it reads as a host: the password's pieces come back decoded.
    ("postgresql://postgres:ab@cd?host=TOP%2FSECRET@127.0.0.1/tune",
     "failed to resolve host 'TOP/SECRET@127.0.0.1/tune'; host 'cd'", ["TOP", "SECRET", "cd"]),
    ("postgresql://postgres:TOP%2FSECRET@127.0.0.1/tune", 'password "TOP/SECRET" refused',
     ["TOP/SECRET"]),
])
def test_every_form_of_the_password_a_driver_echoes_is_masked(
        url: str, echo: str, secrets: list[str]) -> None:
    shown = redact(echo, url)
    for secret in secrets:
        assert f"'{secret}" not in shown and f"{secret}@" not in shown, shown
        assert f'"{secret}"' not in shown and f"{secret}'" not in shown, shown
    assert "***" in shown


def test_a_short_password_leaves_words_hosts_and_ports_readable() -> None:
    url = f"postgresql://postgres:1@127.0.0.1:{_PORT}/tune"
    text = (f'connection to server at "127.0.0.1", port {_PORT} failed: FATAL: password '
            'authentication failed for user "postgres" (try 1)')
    # The whole password, however short, is masked where it stands as a word: only there.
    assert redact(text, url) == text.replace("(try 1)", "(try ***)")
    assert redact(url, url) == f"postgresql://postgres:***@127.0.0.1:{_PORT}/tune"
    p_url = f"postgresql://postgres:P@127.0.0.1:{_PORT}/tune"
    assert redact("Postgres at 'P@127.0.0.1' (P)", p_url) == "Postgres at '***@127.0.0.1' (***)"


_FAILED = ('connection failed: connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
           'password authentication failed for user "postgres" (failedAttempts=1)')


@pytest.mark.parametrize(("password", "text", "shown"), [
    # A common fragment is never cut out of a word (`connect***`): the words stay whole.
    ("ion", _FAILED, _FAILED),
    ("fail", _FAILED, _FAILED),
    ("p%40ss%2Fw%3Ard", _FAILED, _FAILED),
    # The whole password is masked where it stands as a word, not inside `failedAttempts`.
    ("failed", _FAILED, _FAILED.replace("failed ", "*** ").replace("failed:", "***:")),
    # From 8 characters (`_INSIDE_WORDS`), inside words too: no common fragment is so long.
    ("S3cr3tPw", "host S3cr3tPw.example.com, xS3cr3tPwx", "host ***.example.com, x***x"),
    ("p%40ss%2Fw%3Ard", 'database "p@ss/w:rd" or p@ss/w:rd.', 'database "***" or ***.'),
])
def test_a_short_password_is_masked_as_a_word_never_inside_one(
        password: str, text: str, shown: str) -> None:
    assert redact(text, f"postgresql://postgres:{password}@127.0.0.1/tune") == shown
