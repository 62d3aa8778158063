"""What the simulator predicts as a data-parallel job grows from one POD16 to four POD64s.

    python benchmarks/pod_scaling.py

ResNet-50 trained as the MLPerf calibration points encode it (`ipu_tune/calibration/points.yaml`:
224x224, micro-batch 20, FP16.16 with half partials, 8-bit I/O, one IPU per replica, one host
server per 16 IPUs, PopRun instances = replicas / 2), on 16, 64, 128 and 256 Mk2 IPUs, at
gradient accumulation 2, 10 and 32. Printed per size: the gradient all-reduce inside the POD
(IPU-Links) and across PODs (GW-Links) per weight update, and samples/s per IPU: the sync cost
per update grows with the machines and PODs spanned, and more accumulation amortises it.
Deterministic: no timing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ipu_tune

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

SIZES = (16, 64, 128, 256)
ACCUMULATIONS = (2, 10, 32)


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
    record.save()


if __name__ == "__main__":
    main()
