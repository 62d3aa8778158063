"""Time and size of report.html for a 500-trial study (targets: < 5 s, < 10 MB).

    python benchmarks/report_build.py [--trials 500] [--sampler tpe|random]

Every trial is a real simulation of a varied resnet101 plan on 4 Mk2 IPUs, stored in a real
in-memory Optuna study; the results table is built with the results store's own row builder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

import ipu_tune
from ipu_tune.config import EvalConfig, load_config, to_plain_dict
from ipu_tune.results import row_from_trial
from ipu_tune.simulator import SimResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

MODEL = {"name": "resnet101", "input_shape": [3, 64, 64], "num_classes": 10}
NUM_IPUS = 4


def plan(trial: optuna.Trial, blocks: list[str]) -> dict[str, Any]:
    stages = trial.suggest_categorical("stages", [1, 2, 4])
    replicas = NUM_IPUS // stages
    split_at = [round(i * len(blocks) / stages) for i in range(1, stages)]
    return {
        "model": MODEL,
        "workload": {"micro_batch_size": trial.suggest_categorical("mbs", [4, 8, 16, 32, 64])},
        "system": {"num_ipus": NUM_IPUS},
        "plan": {
            "precision": trial.suggest_categorical("precision", ["32.32", "16.32", "16.16"]),
            "gradient_accumulation": trial.suggest_int("ga", 1, 128, log=True),
            "device_iterations": trial.suggest_int("di", 1, 64, log=True),
            "replication_factor": replicas,
            "pipeline": {
                "splits": [blocks[i] for i in split_at],
                "schedule": trial.suggest_categorical("schedule", ["grouped", "interleaved"]),
            },
            "recompute": trial.suggest_categorical("recompute", ["none", "checkpoints"]),
            "available_memory_proportion": trial.suggest_float("amp", 0.1, 1.0),
            "offload_optimizer_state": trial.suggest_categorical("offload", [False, True]),
            "replicated_tensor_sharding": replicas > 1
            and trial.suggest_categorical("rts", [False, True]),
            "prefetch_depth": trial.suggest_int("prefetch", 1, 4),
            "io_tiles": trial.suggest_categorical("io_tiles", [0, 32, 64, 128]),
            "eight_bit_io": trial.suggest_categorical("eight_bit_io", [False, True]),
            "async_dataloader": trial.suggest_categorical("async", [False, True]),
            "dataloader_workers": trial.suggest_categorical("workers", [1, 4, 8, 16]),
        },
    }


def build_study(
    n_trials: int, sampler: str
) -> tuple[optuna.Study, pd.DataFrame, EvalConfig | None, SimResult | None]:
    blocks = ipu_tune.profile(MODEL).blocks
    samplers = {"tpe": optuna.samplers.TPESampler, "random": optuna.samplers.RandomSampler}
    study = optuna.create_study(direction="maximize", sampler=samplers[sampler](seed=0))
    best: list[tuple[float, EvalConfig, SimResult]] = []

    def objective(trial: optuna.Trial) -> float:
        cfg = load_config(plan(trial, blocks))
        result = ipu_tune.evaluate(cfg)
        trial.set_user_attr("config", to_plain_dict(cfg))
        trial.set_user_attr("result", result.to_dict())
        if result.fits and (not best or result.throughput > best[0][0]):
            best[:] = [(result.throughput, cfg, result)]
        return result.throughput

    study.optimize(objective, n_trials=n_trials)
    frame = pd.DataFrame([row_from_trial(study.study_name, t) for t in study.trials])
    if not best:
        return study, frame, None, None
    return study, frame, best[0][1], best[0][2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--sampler", choices=("tpe", "random"), default="tpe")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    t0 = time.perf_counter()
    study, frame, cfg, result = build_study(args.trials, args.sampler)
    print(f"study: {args.trials} simulated trials in {time.perf_counter() - t0:.1f} s")
    print(f"  fitting plans: {int(frame['fits'].sum())}; best: {result and result.throughput:.1f}")

    t0 = time.perf_counter()
    from ipu_tune.exports import export_context, render_exports
    from ipu_tune.report import importances_figure, light_study, write_report

    print(f"import of the report modules (plotly): {time.perf_counter() - t0:.2f} s")
    t0 = time.perf_counter()
    importances_figure(light_study(study))
    print(f"parameter importances alone: {time.perf_counter() - t0:.2f} s")

    times = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            # The PopTorch program rendered as the tuner does, then embedded in the page.
            snippet = (render_exports(export_context(cfg, result))["poptorch"]
                       if cfg is not None else None)
            write_report(path, study=study, results=frame, best_config=cfg, best_result=result,
                         title="b", snippet=snippet)
            times.append(time.perf_counter() - t0)
        size = path.stat().st_size
    print(
        f"report build: first {times[0]:.2f} s, median {statistics.median(times):.2f} s,"
        f" max {max(times):.2f} s over {args.repeats} runs (target < 5 s)"
    )
    print(f"report size: {size / 1e6:.2f} MB (target < 10 MB)")
    record = Run("report_build")
    record.add(f"report build, {args.trials} trials ({args.sampler})", statistics.median(times),
               f"s wall, median of {args.repeats} builds", spread=(min(times), max(times)),
               target="< 5")
    record.add(f"report size, {args.trials} trials ({args.sampler})", size / 1e6, "MB",
               target="< 10")
    record.save()


if __name__ == "__main__":
    main()
