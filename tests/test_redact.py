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
            'authentication failed for user "postgres" (1 try)')
    assert redact(text, url) == text
    assert redact(url, url) == f"postgresql://postgres:***@127.0.0.1:{_PORT}/tune"
    p_url = f"postgresql://postgres:P@127.0.0.1:{_PORT}/tune"
    assert redact("Postgres at 'P@127.0.0.1' (P)", p_url) == "Postgres at '***@127.0.0.1' (***)"
