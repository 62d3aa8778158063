"""Do two writers' fsyncs overlap? Durable journal appends per second, one process against two.

Each process appends `--appends` durable records of a trial's size (about 3.5 KB, the plan
attribute) to one journal file on disk, through Optuna's `JournalFileBackend` (the fsync under
the lock) or ipu-tune's `BatchingJournalBackend` (the fsync after the lock is released), both
with the same kernel lock. Reported: appends per second with 1 and with 2 processes, and their
ratio; rounds alternate the backends (paired). The appends wait on the disk, not on the CPU, so
this isolates the journal's serialisation from the machine's load.

Figures are recorded with benchmarks/_record.py's `Run` (value: median ratio 2 / 1 process;
spread: min and max over rounds); `python benchmarks/write_results.py` renders them into
benchmarks/RESULTS.md.

    python benchmarks/journal_append.py [--appends 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

from optuna.storages.journal import JournalFileBackend

from ipu_tune.storage import BatchingJournalBackend, FlockLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

_RECORD = {"op_code": 7, "worker_id": "w", "trial_id": 1, "user_attr": {"plan": "x" * 3500}}


def _backend(kind: str, path: str) -> JournalFileBackend:
    if kind == "optuna":
        return JournalFileBackend(path, lock_obj=FlockLock(path))
    return BatchingJournalBackend(path, FlockLock(path))


def _writer(kind: str, path: str, appends: int) -> None:
    backend = _backend(kind, path)
    for _ in range(appends):
        backend.append_logs([_RECORD])


def appends_per_s(kind: str, processes: int, appends: int, where: str) -> float:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        path = str(Path(tmp) / "a.journal")
        _backend(kind, path)  # creates the file
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_writer, args=(kind, path, appends))
                 for _ in range(processes)]
        start = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - start
        lines = len(Path(path).read_bytes().splitlines())
        assert lines == processes * appends, lines
        return lines / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    where = tempfile.gettempdir()
    record = Run("journal_append")
    got: dict[str, list[tuple[float, float]]] = {"optuna": [], "ipu-tune": []}
    for r in range(args.rounds):
        for kind in (("optuna", "ipu-tune") if r % 2 == 0 else ("ipu-tune", "optuna")):
            one = appends_per_s(kind, 1, args.appends, where)
            two = appends_per_s(kind, 2, args.appends, where)
            got[kind].append((one, two))
            print(f"{kind}: 1 process {one:.0f}/s, 2 processes {two:.0f}/s "
                  f"({two / one:.2f}x)", flush=True)
    for kind, rows in got.items():
        ratios = [b / a for a, b in rows]
        record.add(f"{kind} journal backend: appends per second, 2 processes / 1",
                   statistics.median(ratios), f"ratio, median of {args.rounds} rounds",
                   spread=(min(ratios), max(ratios)),
                   note=f"appends/s, 1 / 2 processes: "
                        f"{statistics.median(a for a, _ in rows):.0f} / "
                        f"{statistics.median(b for _, b in rows):.0f}; "
                        f"{args.appends} appends per process in {where}")
    record.save()

if __name__ == "__main__":
    main()
