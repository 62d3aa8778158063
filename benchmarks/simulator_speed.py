"""Time one `simulate` of ResNet-101 (the seed plan) on one core.

`python benchmarks/simulator_speed.py` prints CPU microseconds per evaluation (`time.process_time`,
best of 5 rounds, so a loaded machine's waiting does not count):
- warm: the per-block costs of this micro-batch/precision/AMP/tiles are cached (a study revisits
  the same few values), so the call is O(stages);
- cold: every call varies the available memory proportion, so every call costs all ops again
  (vectorised with numpy);
- varied: random plans over the seed's knobs, as a tuner draws them.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import replace

from _record import Run

from ipu_tune.config import ModelConfig
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import simulate


def _per_call_us(fn: object, calls: int) -> list[float]:
    """CPU microseconds per call of each of 5 rounds (the best is the figure)."""
    assert callable(fn)
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for i in range(calls):
            fn(i)
        rounds.append((time.process_time() - start) / calls * 1e6)
    return rounds


def main() -> None:
    record = Run("simulator_speed")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    profile = profile_model(ModelConfig(name="resnet101", input_shape=[3, 64, 64], num_classes=10))
    system = make_system("mk2", 2)
    plan = ExecutionPlan(
        precision="16.16", gradient_accumulation=8, device_iterations=4, splits=("layer3.8",),
        recompute="checkpoints", micro_batch_size=64,
    )
    simulate(profile, system, plan)
    warm = _per_call_us(lambda i: simulate(profile, system, plan), 2000)
    cold = _per_call_us(
        lambda i: simulate(profile, system, replace(
            plan, available_memory_proportion=0.1 + (i % 100_000) * 1e-6 + random.random() * 1e-9
        )),
        300,
    )
    rng = random.Random(0)
    blocks = profile.blocks
    plans = [
        replace(
            plan,
            precision=rng.choice(["16.16", "16.32", "32.32"]),
            gradient_accumulation=rng.choice([4, 8, 16, 32]),
            device_iterations=rng.choice([1, 4, 16]),
            splits=(rng.choice(blocks[5:30]),),
            schedule=rng.choice(["grouped", "interleaved", "sharded"]),
            recompute=rng.choice(["none", "checkpoints", "every_block"]),
            prefetch_depth=rng.choice([1, 2, 3]),
            io_tiles=rng.choice([0, 32, 64, 128]),
            eight_bit_io=rng.random() < 0.5,
            async_dataloader=rng.random() < 0.5,
            micro_batch_size=rng.choice([16, 32, 64]),
            available_memory_proportion=rng.choice([0.1, 0.2, 0.3, 0.6]),
        )
        for _ in range(500)
    ]
    for p in plans:  # fill the caches as a study's first trials would
        simulate(profile, system, p)
    varied = _per_call_us(lambda i: simulate(profile, system, plans[i % len(plans)]), 2000)
    print(f"ResNet-101 ({len(profile.ops)} ops, {len(profile.block_stats)} blocks), seed plan:")
    figures = (("warm (cached per-block costs)", warm, "< 100"),
               ("cold (all ops costed again)", cold, None),
               ("varied plans (500, cached)", varied, None))
    for label, rounds, target in figures:
        print(f"  {label + ':':<31}{min(rounds):7.1f} CPU us per simulate")
        record.add(f"simulate, {label}", min(rounds), "CPU us per call, best of 5 rounds",
                   spread=(min(rounds), max(rounds)), target=target)
    record.save()


if __name__ == "__main__":
    # No options; `--help` says what it runs instead of running (and recording) it.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    main()
