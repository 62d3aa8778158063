"""Prove a speed change left `ipu_tune.evaluate` bit-identical: dump, then compare.

`python benchmarks/evaluate_identity.py dump FILE` evaluates a few hundred varied plans (ResNet,
BERT, ViT, MNIST; pipelined or not; replicas; POD16/POD64/Bow systems; train and infer) through
the public `evaluate(mapping)` and pickles each outcome: the validated config, the `SimResult`
(every field), or the one-line error of a refused plan. `... check FILE` recomputes them with
the code imported now and compares field by field (exit 1 naming the first differences).
Run `dump` on the code before the change, `check` after it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pickle
import random
import sys
from pathlib import Path
from typing import Any

import ipu_tune
from ipu_tune.config import load_config
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import profile_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

_MODELS = {  # zoo name -> (model section, blocks usable as splits come from the profile)
    "resnet50": {"name": "resnet50", "input_shape": [3, 64, 64], "num_classes": 10},
    "resnet101": {"name": "resnet101"},
    "bert_base": {"name": "bert_base"},
    "vit_b16": {"name": "vit_b16"},
    "mnist_cnn": {"name": "mnist_cnn"},
}
_SYSTEMS = (  # base systems; num_ipus is set to stages x replicas
    {"ipu": "mk2"},
    {"ipu": "mk2", "hosts": 4, "host": {"cpu_cores": 128, "network_bytes_per_s": 25.0e9}},
    {"ipu": "bow"},
    {"ipu": "mk1"},
)


def _blocks(model: dict[str, Any]) -> tuple[str, ...]:
    return profile_model(load_config({"model": model}).model).blocks


def mappings(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """`n` varied config mappings (a few of them refused on purpose)."""
    rng = random.Random(seed)
    blocks = {name: _blocks(m) for name, m in _MODELS.items()}
    out = []
    for i in range(n):
        name = rng.choice(sorted(_MODELS))
        stages = rng.choice([1, 1, 2, 4])
        replicas = rng.choice([1, 1, 2, 4, 16]) if i % 11 else 16 * 4 // stages  # POD64
        system = dict(rng.choice(_SYSTEMS), num_ipus=stages * replicas)
        system["hosts"] = min(int(system.get("hosts", 1)), stages * replicas)
        training = rng.random() < 0.6
        usable = blocks[name][1:]
        cuts = sorted(rng.sample(range(len(usable)), min(stages - 1, len(usable))))
        plan: dict[str, Any] = {
            "precision": rng.choice(["32.32", "16.32", "16.16"]),
            "gradient_accumulation": rng.choice([4, 8, 16, 32]) if training else 1,
            "device_iterations": rng.choice([1, 4, 16]),
            "replication_factor": replicas,
            "pipeline": {"splits": [usable[c] for c in cuts],
                         "schedule": rng.choice(["grouped", "interleaved", "sharded"])},
            "recompute": rng.choice(["auto", "none", "checkpoints", "every_block"]),
            "available_memory_proportion": rng.choice([0.1, 0.3, 0.6, 0.9]),
            "offload_optimizer_state": rng.random() < 0.3,
            "replicated_tensor_sharding": replicas > 1 and rng.random() < 0.5,
            "prefetch_depth": rng.choice([1, 2, 3]),
            "io_tiles": rng.choice([0, 32, 64, 128, 192]),
            "async_dataloader": rng.random() < 0.5,
            "dataloader_workers": rng.choice([1, 4, 16]),
            "partials": rng.choice(["float", "half"]),
        }
        if name in ("resnet50", "resnet101", "mnist_cnn", "vit_b16"):
            plan["eight_bit_io"] = rng.random() < 0.5
        workload = {"mode": "train" if training else "infer",
                    "micro_batch_size": rng.choice([1, 4, 16, 64, 256]),
                    "optimizer": rng.choice(["sgd", "adam", "adamw", "lamb"])}
        if i % 37 == 0:  # refused on purpose: the error line must not change either
            plan["io_tiles"] = 33
        out.append({"model": _MODELS[name], "system": system, "workload": workload,
                    "plan": plan})
    return out


def outcome(mapping: dict[str, Any]) -> tuple[str, Any, Any]:
    try:
        return "ok", load_config(mapping), ipu_tune.evaluate(mapping)
    except IpuTuneError as exc:
        return "error", str(exc), None


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    """Field-by-field comparison; floats must be equal bit for bit (NaN equals NaN)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            out.append(f"{where}: {type(a).__name__} != {type(b).__name__}")
            return
        for f in dataclasses.fields(a):
            _diff(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}", out)
    elif isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            out.append(f"{where}: keys {list(a)} != {list(b) if isinstance(b, dict) else b!r}")
            return
        for k in a:
            _diff(a[k], b[k], f"{where}[{k!r}]", out)
    elif isinstance(a, list | tuple):
        if type(a) is not type(b) or len(a) != len(b):
            out.append(f"{where}: {a!r} != {b!r}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out)
    elif isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return
    elif type(a) is not type(b) or a != b:
        out.append(f"{where}: {a!r} != {b!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("dump", "check"))
    parser.add_argument("file", type=Path)
    parser.add_argument("--plans", type=int, default=400)
    args = parser.parse_args()
    cases = mappings(args.plans)
    results = [outcome(m) for m in cases]
    if args.action == "dump":
        args.file.write_bytes(pickle.dumps(results))
        fits = sum(1 for kind, _, r in results if kind == "ok" and r.fits)
        errors = sum(1 for kind, _, _ in results if kind == "error")
        print(f"{len(results)} outcomes written to {args.file} ({fits} fit, {errors} refused)")
        return 0
    before = pickle.loads(args.file.read_bytes())
    problems: list[str] = []
    for i, (old, new) in enumerate(zip(before, results, strict=True)):
        _diff(old, new, f"plan {i}", problems)
    for line in problems[:20]:
        print(line)
    print(f"{len(results)} outcomes compared, {len(problems)} differences")
    record = Run("evaluate_identity")
    record.add(f"fields that differ over {len(results)} outcomes", len(problems),
               "count (0: bit-identical)", target="0")
    record.save()
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
