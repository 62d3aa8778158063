"""How long profiling takes: cold (tracing), from the disk cache, and from the in-process cache.

    python benchmarks/profile_speed.py [--model resnet101] [--repeats 3]

Each cold and disk figure comes from a fresh Python process (torch already imported, as in the
tuner), so it includes what a new tuner worker pays. "cold, first in process" also pays torch's
one-time lazy imports that its Python meta kernels trigger (torch._dynamo, sympy: timed alone on
the next line); "cold, warm process" is a second model traced in the same process.
Targets: ResNet-101 < 2 s cold, < 50 ms from disk.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _record import Run

REPO = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, sys, time
import torch  # torch's own import is not counted: any torch program pays it
from ipu_tune.config import ModelConfig
from ipu_tune.models import clear_memory_cache, profile_model
from ipu_tune.models._build import compute as _compute

name, shape, classes, mode = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
cfg = ModelConfig(name=name, input_shape=shape, num_classes=classes)
out = {}
if mode == "imports":
    t0 = time.perf_counter()
    import torch._dynamo, torch.fx.experimental.symbolic_shapes  # noqa: E401, F401
    out["imports"] = time.perf_counter() - t0
elif mode == "cold":
    t0 = time.perf_counter(); prof = profile_model(cfg); out["first"] = time.perf_counter() - t0
    # Same model, different class count: a cache miss in a process that has traced before.
    other = ModelConfig(name=name, input_shape=shape, num_classes=classes + 1)
    t0 = time.perf_counter(); _compute(other); out["warm_process"] = time.perf_counter() - t0
    out["ops"] = len(prof.ops); out["params"] = prof.parameters
    out["gflop"] = prof.forward_flops / 1e9
else:
    t0 = time.perf_counter(); profile_model(cfg); out["disk"] = time.perf_counter() - t0
    n = 10000
    t0 = time.perf_counter()
    for _ in range(n):
        profile_model(cfg)
    out["memory"] = (time.perf_counter() - t0) / n
print(json.dumps(out))
"""


def _run(args: list[str], cache: str) -> dict[str, float]:
    env = {**os.environ, "IPU_TUNE_CACHE_DIR": cache, "PYTHONPATH": str(REPO)}
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet101")
    ap.add_argument("--input-shape", nargs="+", type=int, default=[3, 224, 224])
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    args = [a.model, json.dumps(a.input_shape), str(a.num_classes)]
    first, warm, disk, memory, imports = [], [], [], [], []
    info: dict[str, float] = {}
    for _ in range(a.repeats):
        with tempfile.TemporaryDirectory() as cache:
            cold = _run([*args, "cold"], cache)
            hit = _run([*args, "disk"], cache)
            imports.append(_run([*args, "imports"], cache)["imports"])
        info = cold
        first.append(cold["first"])
        warm.append(cold["warm_process"])
        disk.append(hit["disk"])
        memory.append(hit["memory"])
    head = f"{a.model} {a.input_shape} {a.num_classes} classes: {int(info['ops'])} ops, "
    head += f"{int(info['params']):,} parameters, {info['gflop']:.2f} GFLOP forward per sample"
    print(head)
    print(f"{'measure':<34}{'median':>12}{'min':>12}{'max':>12}")
    rows = [
        ("cold, first in process (s)", first, 1.0),
        ("  of which torch lazy imports (s)", imports, 1.0),
        ("cold, warm process (s)", warm, 1.0),
        ("disk cache, fresh process (ms)", disk, 1e3),
        ("in-process cache (us)", memory, 1e6),
    ]
    record = Run("profile_speed")
    units = {1.0: "s", 1e3: "ms", 1e6: "us"}
    targets = {"cold, first in process (s)": "< 2", "disk cache, fresh process (ms)": "< 50"}
    for label, values, scale in rows:
        v = [x * scale for x in values]
        print(f"{label:<34}{statistics.median(v):>12.3f}{min(v):>12.3f}{max(v):>12.3f}")
        record.add(f"{a.model} {a.input_shape}: {label.split(' (')[0].strip()}",
                   statistics.median(v), f"{units[scale]}, median of {a.repeats} repeats",
                   spread=(min(v), max(v)), target=targets.get(label))
    record.save()


if __name__ == "__main__":
    main()
