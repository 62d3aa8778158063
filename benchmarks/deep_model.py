"""Wall time of the main command on a deep model: BERT with 300 narrow layers (hidden 64),
3 trials, on 2 Mk2 IPUs, where no plan fits (target: < 10 s).

    python benchmarks/deep_model.py [--rounds 3]

The time goes to the pipeline-split planner (the warm start's balanced splits, and the
remedy that finds the fewest IPUs that fit, up to a stage per block): a dynamic programme over
every block range for every stage. One warm-up run fills the profile cache first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import REPO, Run

LAYERS = 300
COMMAND = ["-m", "ipu_tune", "model=hf", "model.hf.model_type=bert",
           f"model.hf.config={{num_hidden_layers: {LAYERS}, hidden_size: 64, "
           "num_attention_heads: 2, intermediate_size: 64}", "study.n_trials=3",
           "study.progress_bar=false"]


def one_run() -> tuple[float, str]:
    """(wall seconds, the summary's remedy line) of the command in a fresh directory."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *COMMAND], cwd=tmp, env=env, check=True,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
    remedy = next((line.strip() for line in done.stdout.splitlines()
                   if line.startswith("  - ")), "no remedy line")
    return wall, remedy


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    record = Run("deep_model")
    one_run()  # warm the profile cache
    runs = [one_run() for _ in range(args.rounds)]
    walls = [w for w, _ in runs]
    print(f"{LAYERS}-layer model: wall {statistics.median(walls):.2f} s; {runs[0][1]}")
    record.add(f"main command, {LAYERS}-layer BERT, 3 trials, wall", statistics.median(walls),
               f"s, median of {args.rounds} runs", spread=(min(walls), max(walls)),
               target="< 10", note=runs[0][1][:120])
    record.save()


if __name__ == "__main__":
    main()
