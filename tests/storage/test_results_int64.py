"""A figure past 64 bits (the peak memory of a model of absurd sizes, `vocab_size: 10**15` in
a config.json) is stored as the largest 64-bit integer: SQLite's driver raised OverflowError, a
traceback after the trial had run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.storage import ResultsStore

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_figure_past_64_bits_is_stored_as_the_largest(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = (f"sqlite:///{tmp_path / 'r.db'}" if backend == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = ResultsStore(url)
    try:
        store.insert([{"study": f"wide-{tmp_path.name}", "trial_number": 0, "state": "PRUNED",
                       "peak_memory_bytes": 10**20, "memory_limit_bytes": -(10**20)}])
        (row,) = store.rows(f"wide-{tmp_path.name}")
        assert row["peak_memory_bytes"] == INT64_MAX
        assert row["memory_limit_bytes"] == -INT64_MAX - 1
    finally:
        store.close()
