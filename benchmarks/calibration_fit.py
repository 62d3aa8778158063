"""How well the simulator's fitted constants reproduce the measured runs it was calibrated on.

    python benchmarks/calibration_fit.py

For every calibration point of the package (`ipu_tune.calibration.default_points()`: the seed
hands-on's ladder and execution traces, the pipelining tutorial, MLPerf ResNet-50 on a Mk2
POD16, a Mk2 POD64 and a Bow POD16) it simulates the point with the shipped constants and
prints the measured and predicted figure and the error; out-of-memory points give the
most-loaded IPU or tile as a share of its limit. Deterministic: no timing involved. The
validation test checks the same predictions against each point's tolerance.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from ipu_tune.calibration import default_points, predict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import Run


def main() -> None:
    record = Run("calibration_fit")
    print("| point | measured | predicted | error | tolerance |")
    print("| --- | --- | --- | --- | --- |")
    for p in predict(default_points()):
        point = p.point
        tol = f"{100 * point.tolerance:.0f}%" if point.tolerance is not None else ""
        if point.result is not None:
            verdict = "fits" if p.result.fits else "out of memory"
            print(f"| {point.name} | {point.result} | {verdict} ({100 * p.memory_ratio:.0f}% of "
                  "the fullest IPU or tile) | | |")
            record.add(f"{point.name}: fullest IPU or tile / its limit",
                       100 * p.memory_ratio, "% (over 100: does not fit)",
                       target="> 100" if point.result == "out_of_memory" else "<= 100",
                       note=f"measured: {point.result}")
        errors = p.errors()
        if point.samples_per_s is not None:
            print(f"| {point.name} | {point.samples_per_s:,.0f} samples/s | "
                  f"{p.samples_per_s:,.0f} | {100 * errors['samples_per_s']:+.1f}% | {tol} |")
            record.add(f"{point.name}: samples/s error", 100 * errors["samples_per_s"],
                       "% (predicted / measured - 1)", target=f"within +-{tol}" if tol else None,
                       note=f"measured {point.samples_per_s:,.0f}, predicted "
                            f"{p.samples_per_s:,.0f}")
        if point.device_cycles is not None:
            print(f"| {point.name} | {point.device_cycles / 1e6:.1f} M cycles | "
                  f"{p.device_cycles / 1e6:.1f} M | {100 * errors['device_cycles']:+.1f}% | "
                  f"{tol} |")
            record.add(f"{point.name}: device cycles error", 100 * errors["device_cycles"],
                       "% (predicted / measured - 1)", target=f"within +-{tol}" if tol else None,
                       note=f"measured {point.device_cycles / 1e6:.1f} M, predicted "
                            f"{p.device_cycles / 1e6:.1f} M")
    _partials(record)
    record.save()


def _partials(record: Run) -> None:
    """What half partials give over float partials on each point run with half partials: the
    same plan simulated both ways (the figure `explain` prints as the partials row)."""
    print("\n| point run with half partials | float partials instead | half / float |")
    print("| --- | --- | --- |")
    points = [p for p in default_points()
              if p.samples_per_s is not None and p.config.plan.partials == "half"]
    for half in predict(points):
        cfg = copy.deepcopy(half.point.config)
        cfg.plan.partials = "float"
        flt = predict([type(half.point)(name=half.point.name, config=cfg)])[0]
        gain = half.samples_per_s / flt.samples_per_s - 1
        print(f"| {half.point.name} | {flt.samples_per_s:,.0f} samples/s | {100 * gain:+.1f}% |")
        record.add(f"{half.point.name}: half partials over float partials", 100 * gain,
                   "% throughput (simulated, same plan)",
                   note=f"half {half.samples_per_s:,.0f}, float {flt.samples_per_s:,.0f} samples/s")


if __name__ == "__main__":
    # No options; `--help` says what it runs instead of running (and recording) it.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    main()
