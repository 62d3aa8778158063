"""What the simulator predicts as a data-parallel job grows from one POD16 to four POD64s.

    python benchmarks/pod_scaling.py

ResNet-50 trained as the MLPerf calibration points encode it (`ipu_tune/calibration/points.yaml`:
224x224, micro-batch 20, FP16.16 with half partials, 8-bit I/O, one IPU per replica, one host
server per 16 IPUs, PopRun instances = replicas / 2), on 16, 64, 128 and 256 Mk2 IPUs, at
gradient accumulation 1, 3, 10 and 32. Printed per size: the gradient all-reduce inside the
POD (IPU-Links) and across PODs (GW-Links) per weight update, and samples/s per IPU: the sync
cost per update grows with the machines and PODs spanned, and more accumulation amortises it.

Then the fall per IPU as Graphcore ran it: the MLPerf POD16 run accumulated 10 micro-batches per
update and the POD64 run 3 (their configs keep the global batch near 3,200-3,840 as replicas
grow), so each weight update's all-reduce and optimizer step is shared by fewer samples. The
measured and simulated samples/s per IPU of those two calibration points, and their ratio.
Deterministic: no timing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import ipu_tune
from ipu_tune.calibration import default_points, predict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

SIZES = (16, 64, 128, 256)
ACCUMULATIONS = (1, 3, 10, 32)
AS_RUN = ("mlperf_resnet50_pod16", "mlperf_resnet50_pod64")


def mapping(num_ipus: int, accumulation: int) -> dict[str, Any]:
    return {
        "model": {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000,
                  "dataset": {"name": "imagenet", "preprocess_s_per_sample": 0.0025}},
        "workload": {"mode": "train", "micro_batch_size": 20, "optimizer": "momentum"},
        "system": {"ipu": "mk2", "num_ipus": num_ipus, "hosts": max(1, num_ipus // 16),
                   "host": {"cpu_cores": 128, "network_bytes_per_s": 25.0e9}},
        "plan": {"precision": "16.16", "partials": "half", "device_iterations": 50,
                 "eight_bit_io": True,
                 "available_memory_proportion": 0.15, "recompute": "checkpoints",
                 "async_dataloader": True, "dataloader_workers": 16, "prefetch_depth": 3,
                 "gradient_accumulation": accumulation, "replication_factor": num_ipus,
                 "host_instances": num_ipus // 2},
    }


def main() -> None:
    record = Run("pod_scaling")
    heads = " | ".join(f"samples/s per IPU, GA {g}" for g in ACCUMULATIONS)
    print(f"| IPUs | all_reduce_pod | all_reduce_gw | {heads} |")
    print("|---|---|---|" + "---|" * len(ACCUMULATIONS))
    for n in SIZES:
        results = [ipu_tune.evaluate(mapping(n, g)) for g in ACCUMULATIONS]
        phases = results[0].phases
        rates = [r.throughput / n for r in results]
        print(f"| {n} | {1e3 * phases['all_reduce_pod']:.2f} ms | "
              f"{1e3 * phases['all_reduce_gw']:.2f} ms | "
              + " | ".join(f"{x:,.0f}" for x in rates) + " |")
        record.add(f"{n} IPUs: gradient all-reduce inside the POD", 1e3 * phases["all_reduce_pod"],
                   "ms per weight update")
        record.add(f"{n} IPUs: gradient all-reduce across PODs", 1e3 * phases["all_reduce_gw"],
                   "ms per weight update")
        for g, rate in zip(ACCUMULATIONS, rates, strict=True):
            record.add(f"{n} IPUs, GA {g}: samples/s per IPU", rate, "samples/s per IPU")
    _as_run(record)
    record.save()


def _as_run(record: Run) -> None:
    """Measured vs simulated samples/s per IPU of the MLPerf POD16 and POD64 points, as run."""
    points = {p.name: p for p in default_points() if p.name in AS_RUN}
    per_ipu = {}
    print("\n| point | GA | measured samples/s per IPU | simulated |")
    print("|---|---|---|---|")
    for pred in predict([points[name] for name in AS_RUN]):
        pt = pred.point
        n = pt.config.system.num_ipus
        assert pt.samples_per_s is not None
        per_ipu[pt.name] = (pt.samples_per_s / n, pred.samples_per_s / n)
        print(f"| {pt.name} | {pt.config.plan.gradient_accumulation} | "
              f"{pt.samples_per_s / n:,.0f} | {pred.samples_per_s / n:,.0f} |")
    (m16, s16), (m64, s64) = (per_ipu[name] for name in AS_RUN)
    print(f"POD64 / POD16 per IPU: measured x{m64 / m16:.3f}, simulated x{s64 / s16:.3f}")
    record.add("as run, POD64 / POD16 samples/s per IPU: measured", m64 / m16, "ratio")
    record.add("as run, POD64 / POD16 samples/s per IPU: simulated", s64 / s16, "ratio")


if __name__ == "__main__":
    # No options; `--help` says what it runs instead of running (and recording) it.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    main()
