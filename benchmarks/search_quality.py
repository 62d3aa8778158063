"""Search quality: the best plan a sampler finds in N trials against the exhaustive optimum.

For each case (ResNet-101 over 2 Mk2 IPUs, the seed session's setting; ResNet-50 over an
IPU-POD16 at the MLPerf micro-batch of 20) a discretised throughput space is enumerated in
full with the simulator (brute force), then TPE and random sampling search the same space
for `--trials` trials (in-memory storage), with and without the warm start, over `--seeds`
seeds. Prints a markdown table of the median (and worst) best throughput as a share of the
optimum. Target: TPE reaches >= 99 % of the optimum.

    python benchmarks/search_quality.py [--trials 200] [--seeds 5] [--cases r101,r50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ipu_tune.config import CONF_DIR, SamplerConfig, TuneConfig, typed
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.search import SearchProblem, make_sampler, parse_space

# Knobs with a handful of values each, so that brute force stays within a minute or two.
_COMMON: dict[str, Any] = {
    "plan.precision": {"choices": ["32.32", "16.32", "16.16"]},
    "plan.recompute": {"choices": ["none", "checkpoints"]},
    "plan.offload_optimizer_state": None,
    "plan.replicated_tensor_sharding": None,
    "plan.pipeline.schedule": {"choices": ["grouped", "interleaved"]},
    "plan.io_tiles": {"choices": [0, 32]},
    "plan.eight_bit_io": None,
    "plan.async_dataloader": None,
    "plan.dataloader_workers": {"choices": [1, 4, 16]},
}


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    config: dict[str, Any]
    knobs: dict[str, Any]


CASES = (
    Case(
        "r101",
        "ResNet-101, 2 x Mk2 (seed)",
        {
            "model": {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10},
            "workload": {"micro_batch_size": 64},
            "system": {"ipu": "mk2", "num_ipus": 2},
            "plan": {"precision": "32.32", "gradient_accumulation": 3,
                     "pipeline": {"splits": ["layer3.8"]}},
        },
        {
            **_COMMON,
            "plan.gradient_accumulation": {"choices": [1, 4, 16, 64]},
            "plan.device_iterations": {"choices": [1, 4, 16, 64]},
            "plan.prefetch_depth": {"choices": [1, 3]},
            "plan.replication_factor": None,
            "plan.pipeline.splits": {"step": 2},
        },
    ),
    Case(
        "r50",
        "ResNet-50, 16 x Mk2 (POD16)",
        {
            "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000},
            "workload": {"micro_batch_size": 20, "optimizer": "momentum"},
            "system": {"ipu": "mk2", "num_ipus": 16, "hosts": 4},
            "plan": {"precision": "16.16", "gradient_accumulation": 4, "replication_factor": 16},
        },
        {
            **_COMMON,
            "plan.precision": {"choices": ["16.32", "16.16"]},
            "plan.gradient_accumulation": {"choices": [1, 4, 16, 64]},
            "plan.device_iterations": {"choices": [1, 8, 64]},
            "plan.replication_factor": {"choices": [4, 8, 16]},
            "plan.pipeline.splits": {"step": 3},
        },
    ),
)


def make_problem(case: Case) -> SearchProblem:
    cfg = typed(TuneConfig, {**case.config, "search": {"name": "bench", "space": "throughput"}})
    profile = profile_model(cfg.model)
    system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
    space = parse_space({"knobs": case.knobs}, source=f"<{case.key}>", name=case.key)
    return SearchProblem(cfg, profile, system, space=space)


def exhaustive(problem: SearchProblem) -> tuple[float, int, float, float]:
    """(best feasible throughput, plans enumerated, share within 1 % of it, seconds)."""
    start = time.perf_counter()
    values = []
    for params in problem.codec.grid():
        decoded = problem.codec.decode(params)
        outcome = problem.evaluate(decoded.config, decoded.note)
        values.append(outcome.values[0] if outcome.feasible else 0.0)
    best = max(values, default=0.0)
    near = sum(1 for v in values if best > 0 and v >= 0.99 * best) / max(1, len(values))
    return best, len(values), near, time.perf_counter() - start


def search(problem: SearchProblem, sampler: str, seed: int, trials: int, warm: bool) -> float:
    # The shipped presets' settings (conf/sampler/<name>.yaml), seeded per run.
    preset = yaml.safe_load((CONF_DIR / "sampler" / f"{sampler}.yaml").read_text())
    params = preset.get("params") or {}
    study = optuna.create_study(
        directions=problem.directions,
        sampler=make_sampler(SamplerConfig(name=sampler, seed=seed, params=params)),
    )
    if warm:
        for p in problem.warm_start()[:trials]:
            study.enqueue_trial(p)
    for _ in range(trials):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        study.tell(trial, outcome.values)
    best = problem.best_trial(study)
    return float(best.values[0]) if best is not None and best.values else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cases", default=",".join(c.key for c in CASES))
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    wanted = set(args.cases.split(","))
    rows = []
    for case in CASES:
        if case.key not in wanted:
            continue
        problem = make_problem(case)
        size = problem.codec.grid_size()
        optimum, count, near, secs = exhaustive(problem)
        print(f"{case.title}: {count} plans enumerated in {secs:.0f} s, optimum "
              f"{optimum:.1f} samples/s, {100 * near:.3f} % of plans within 1 % of it",
              file=sys.stderr)
        for sampler in ("tpe", "random"):
            for warm in (True, False):
                start = time.perf_counter()
                found = [search(problem, sampler, seed, args.trials, warm)
                         for seed in range(args.seeds)]
                secs = time.perf_counter() - start
                shares = [f / optimum if optimum > 0 else 0.0 for f in found]
                rows.append((case.title, size, near, optimum, sampler, warm,
                             statistics.median(found), statistics.median(shares), min(shares),
                             secs / args.seeds))
    print(f"\n{args.trials} trials, median over {args.seeds} seeds; throughput in samples/s\n")
    print("| case | plans in space | plans >= 99 % | optimum | sampler | warm start | "
          "median best | median % of optimum | worst % | s per study |")
    print("|---|---:|---:|---:|---|---|---:|---:|---:|---:|")
    for title, size, near, opt, sampler, warm, med, share, worst, secs in rows:
        print(f"| {title} | {size} | {100 * near:.3f} % | {opt:.0f} | {sampler} | "
              f"{'yes' if warm else 'no'} | {med:.0f} | {100 * share:.1f} | {100 * worst:.1f} "
              f"| {secs:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
