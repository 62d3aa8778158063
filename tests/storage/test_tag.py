"""A database server's export tag (`ipu_tune.storage._tag`) is the database it reaches: one
stored study has one `<name>@<tag>` folder whatever the login, driver or TLS options, and two
databases never share one."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.storage import resolve_storage

_ONE_DATABASE = [
    "postgresql://u2:pw2@127.0.0.1:55432/db1",
    "postgresql://u5:an0ther%40pw@127.0.0.1:55432/db1",
    "postgresql+psycopg://u6@127.0.0.1:55432/db1?password=x&sslmode=require",
    "postgresql+psycopg2://u6:failed@127.0.0.1:55432/db1?connect_timeout=5&application_name=a",
]
_OTHER_DATABASES = [
    "postgresql://u2:pw2@127.0.0.1:55433/db1",  # another server
    "postgresql://u2:pw2@127.0.0.2:55432/db1",
    "postgresql://u2:pw2@127.0.0.1:55432/db2",  # another database
    "postgresql://u2:pw2@127.0.0.1:55432/db1?options=-csearch_path%3Dother",  # another schema
    "postgresql://u2:pw2@127.0.0.1:55432/db1?host=/var/run/postgresql",  # a socket's server
]


def _tag(url: str, tmp_path: Path) -> str:
    return resolve_storage(url, str(tmp_path / "results")).export_tag


def test_one_database_under_every_login_has_one_tag_and_no_other_shares_it(
        tmp_path: Path) -> None:
    assert len({_tag(url, tmp_path) for url in _ONE_DATABASE}) == 1
    tags = [_tag(url, tmp_path) for url in [_ONE_DATABASE[0], *_OTHER_DATABASES]]
    assert len(set(tags)) == len(tags), tags


def test_the_default_port_is_the_port_it_stands_for(tmp_path: Path) -> None:
    assert _tag("postgresql://u@h/db", tmp_path) == _tag("postgresql://v:p@H:5432/db", tmp_path)

