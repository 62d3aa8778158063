"""Benchmark figures as data: every benchmark run appends one JSON record to `runs/NAME.json`.

A record holds the date (UTC), the command line, the machine (cores, load average from
`os.getloadavg` when the run started and when it ended) and the figures, each with its value,
unit, spread (lowest and highest of the rounds, when there are rounds) and target.
`python benchmarks/write_results.py` renders every record into `benchmarks/RESULTS.md`, one
table per figure: the figures of the documentation come from there, never typed by hand.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

RUNS_DIR = Path(__file__).resolve().parent / "runs"
REPO = Path(__file__).resolve().parent.parent
KEEP_RUNS = 10  # records kept per benchmark: the newest


def code_version(repo: Path = REPO) -> str:
    """The commit measured, `+changes` when the package or its configs differ from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--", "ipu_tune", "conf", "search_spaces")
    return commit + ("+changes" if changed else "")


class Run:
    """One run of a benchmark: `add` its figures, then `save` (the load is read at both ends)."""

    def __init__(self, benchmark: str) -> None:
        self.benchmark = benchmark
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.load_start = os.getloadavg()
        self.figures: list[dict[str, Any]] = []

    def add(self, name: str, value: float, unit: str, spread: tuple[float, float] | None = None,
            target: str | None = None, note: str | None = None) -> None:
        """One figure; `spread` is (lowest, highest) over the rounds behind `value`."""
        self.figures.append({
            "name": name, "value": float(value), "unit": unit,
            "spread": None if spread is None else [float(spread[0]), float(spread[1])],
            "target": target, "note": note})

    def save(self, runs_dir: Path = RUNS_DIR) -> Path:
        """Append this run to `runs_dir/<benchmark>.json` (newest last) and return the path."""
        runs_dir.mkdir(parents=True, exist_ok=True)
        path = runs_dir / f"{self.benchmark}.json"
        old = json.loads(path.read_text()) if path.exists() else []
        record = {
            "benchmark": self.benchmark,
            "date": self.started.strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python " + shlex.join(
                [f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "code": code_version(),
            "cpus": os.cpu_count(),
            "load_start": [round(x, 2) for x in self.load_start],
            "load_end": [round(x, 2) for x in os.getloadavg()],
            "figures": self.figures,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([*old, record][-KEEP_RUNS:], indent=1) + "\n")
        tmp.replace(path)
        print(f"figures recorded in {path} (render: python benchmarks/write_results.py)",
              file=sys.stderr)
        return path
