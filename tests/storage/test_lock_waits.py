"""Workers on one machine do not wait longer than the locks they share are held: the local
search has a lock of its own, and a busy lock is polled soon, then less and less often."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ipu_tune.errors import IpuTuneError
from ipu_tune.storage import ClaimLock, FlockLock


def test_a_claim_is_taken_while_the_local_search_holds_its_lock(tmp_path: Path) -> None:
    claims = ClaimLock(str(tmp_path / "s.claims"), timeout_s=1.0)
    with claims.refining("s"), claims.claiming():  # one lock would time out here
        pass


def test_two_local_searches_of_one_storage_take_turns(tmp_path: Path) -> None:
    path = str(tmp_path / "s.claims")
    with ClaimLock(path).refining("s"), pytest.raises(IpuTuneError, match="refine lock"), \
            ClaimLock(path, timeout_s=0.1).refining("s"):
        pass


def test_a_busy_lock_is_polled_first_within_a_millisecond_then_up_to_every_20_ms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = str(tmp_path / "x.journal")
    holder = FlockLock(journal)
    holder.acquire()
    naps: list[float] = []

    def nap(seconds: float) -> None:  # the holder lets go after the waiter's 12th poll
        naps.append(seconds)
        if len(naps) == 12:
            holder.release()

    monkeypatch.setattr(time, "sleep", nap)
    waiter = FlockLock(journal)
    assert waiter.acquire()
    waiter.release()
    assert len(naps) == 12
    assert naps[0] <= 0.001
    assert naps == sorted(naps)
    assert max(naps) == pytest.approx(0.02)
