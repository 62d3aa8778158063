"""Instructions per `ipu_tune.evaluate(mapping)` call: a figure a loaded machine does not move.

`python benchmarks/evaluate_cost.py` runs this file twice under valgrind's callgrind (0 and
`--calls` calls after the same warm-up: cached ResNet-101 profile, 2 stages, startup.py's
mapping) and prints the instructions per call of each part: the whole `evaluate`, the
mapping -> validated config (`load_config`), the case (`build_case`) and `simulate` alone.
Timings on a shared 2-core machine vary 2x with the other jobs' load; instruction counts do
not (a few hundred per call). Needs `valgrind` (Debian package); about a minute per run idle.

`python benchmarks/evaluate_cost.py --loop PART N` is the measured program itself.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

from _record import Run

PARTS = ("evaluate", "load_config", "build_case", "simulate")
MAPPING = {"model": {"name": "resnet101"}, "system": {"num_ipus": 2},
           "plan": {"precision": "16.16", "pipeline": {"splits": ["layer3.10"]},
                    "gradient_accumulation": 8}}


def loop(part: str, calls: int) -> None:
    import ipu_tune
    from ipu_tune.case import build_case, simulate_case
    from ipu_tune.config import load_config

    cfg = load_config(MAPPING)
    case = build_case(cfg)
    ipu_tune.evaluate(MAPPING)
    fn: Callable[[], object] = {
        "evaluate": lambda: ipu_tune.evaluate(MAPPING),
        "load_config": lambda: load_config(MAPPING),
        "build_case": lambda: build_case(cfg),
        "simulate": lambda: simulate_case(case),
    }[part]
    for _ in range(calls):
        fn()


def _instructions(part: str, calls: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--loop", part, str(calls)],
        capture_output=True, text=True, check=True, env=os.environ.copy()).stderr
    found = re.search(r"Collected : (\d+)", out)
    if found is None:
        raise SystemExit("valgrind printed no instruction count")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--loop", nargs=2, metavar=("PART", "N"))
    args = parser.parse_args()
    if args.loop:
        loop(args.loop[0], int(args.loop[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind: not installed (apt-get install valgrind)")
    record = Run("evaluate_cost")
    base = _instructions("evaluate", 0)  # start-up and warm-up, the same for every part
    print("| part | instructions per call |")
    print("| --- | --- |")
    for part in args.parts:
        per_call = (_instructions(part, args.calls) - base) / args.calls
        print(f"| {part} | {per_call / 1e3:.0f} k |", flush=True)
        record.add(f"{part}: instructions per call", per_call / 1e3,
                   f"thousand instructions per call, {args.calls} calls (callgrind)")
    record.save()


if __name__ == "__main__":
    main()
