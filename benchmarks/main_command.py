"""Wall and CPU time of the main command, start to finish (target: < 10 s).

    python benchmarks/main_command.py [--rounds 3]

Runs `python -m ipu_tune model=resnet101 search=throughput study.progress_bar=false` as a user
does, each round in a fresh results directory (100 trials, exports and report included), after
one warm-up run that fills the model-profile cache as any earlier run would. CPU is the child
process's user + system time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import REPO, Run

COMMAND = ["-m", "ipu_tune", "model=resnet101", "search=throughput", "study.progress_bar=false"]


def one_run() -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the main command in a fresh directory."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, *COMMAND], cwd=tmp, env=env, check=True,
                       capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    record = Run("main_command")
    one_run()  # warm the profile cache
    walls, cpus = zip(*(one_run() for _ in range(args.rounds)), strict=True)
    print(f"main command: wall {statistics.median(walls):.2f} s (min {min(walls):.2f}, max "
          f"{max(walls):.2f}), CPU {statistics.median(cpus):.2f} s over {args.rounds} rounds")
    record.add("main command, wall", statistics.median(walls),
               f"s, median of {args.rounds} runs", spread=(min(walls), max(walls)), target="< 10")
    record.add("main command, CPU", statistics.median(cpus), f"s, median of {args.rounds} runs",
               spread=(min(cpus), max(cpus)))
    record.save()


if __name__ == "__main__":
    main()
