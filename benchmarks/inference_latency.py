"""What the simulator predicts for single-IPU inference as Graphcore's benchmarks run it.

    python benchmarks/inference_latency.py

ResNet-50 and ViT-B/16 (224x224, 1000 classes) and BERT-Large with the SQuAD head (sequence
length 128) on one IPU, FP16.16 with half partials, synthetic data (made on the IPU: no host
work, no host-device stream), one replica, no pipelining. Per IPU (Mk2 at 1.33 GHz, Bow at 1.85
GHz, a C600 card at 1.5 GHz) and micro-batch, at device iterations 1 and 100: samples/s of the
whole call (device iterations x micro-batch over the call time, the per-call cost included) and
the latency of a call of one micro-batch (device iterations 1: the per-call cost and one
forward pass; PopTorch returns a call's outputs when it ends, so at 100 iterations every
sample waits for the whole call). The per-call cost of an
inference call is an estimate (`infer_call_overhead_s`): no published figure fixes it.
Deterministic: no timing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import ipu_tune

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run

IPUS = ("mk2", "bow", "c600")
MODELS: dict[str, tuple[dict[str, Any], tuple[int, ...]]] = {
    "resnet50": ({"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000},
                 (1, 4, 16, 32, 64, 80)),
    "bert_large_squad SL128": ({"name": "bert_large_squad", "sequence_length": 128},
                               (1, 4, 8, 18)),
    "vit_b_16": ({"name": "vit_b_16", "input_shape": [3, 224, 224], "num_classes": 1000},
                 (1, 4, 16, 32)),
}
DEVICE_ITERATIONS = (1, 100)


def mapping(model: dict[str, Any], ipu: str, batch: int, iterations: int) -> dict[str, Any]:
    return {
        "model": {**model, "dataset": {"name": "synthetic"}},
        "workload": {"mode": "infer", "micro_batch_size": batch},
        "system": {"ipu": ipu, "num_ipus": 1},
        "plan": {"precision": "16.16", "partials": "half", "device_iterations": iterations},
    }


def main() -> None:
    record = Run("inference_latency")
    print("| model | IPU | micro-batch | samples/s, DI 1 | samples/s, DI 100 "
          "| latency at DI 1 (ms) |")
    print("|---|---|---|---|---|---|")
    for label, (model, batches) in MODELS.items():
        for ipu in IPUS:
            for batch in batches:
                one, many = (ipu_tune.evaluate(mapping(model, ipu, batch, di))
                             for di in DEVICE_ITERATIONS)  # fmt: skip
                if not (one.fits and many.fits):
                    print(f"| {label} | {ipu} | {batch} | does not fit: {one.reason} |")
                    continue
                latency_ms = 1e3 * float(one.to_dict()["latency_s"])
                print(f"| {label} | {ipu} | {batch} | {one.throughput:,.0f} | "
                      f"{many.throughput:,.0f} | {latency_ms:.3f} |")
                name = f"{label}, {ipu}, micro-batch {batch}"
                record.add(f"{name}: samples/s at DI 1", one.throughput, "samples/s")
                record.add(f"{name}: samples/s at DI 100", many.throughput, "samples/s")
                record.add(f"{name}: latency of a call at DI 1", latency_ms, "ms")
    record.save()


if __name__ == "__main__":
    # No options; `--help` says what it runs instead of running (and recording) it.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    main()
