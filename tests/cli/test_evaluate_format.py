"""`evaluate` prints no rate for a plan that does not fit: it does not run, so it has none."""

from __future__ import annotations

import ipu_tune
from ipu_tune.cli.evaluate_format import format_result
from ipu_tune.config import load_config


def test_a_plan_that_does_not_fit_has_no_samples_per_second() -> None:
    cfg = load_config({"system": {"num_ipus": 1}, "workload": {"micro_batch_size": 4096}})
    result = ipu_tune.evaluate(cfg)
    assert not result.fits
    (line,) = [x for x in format_result(result, cfg).splitlines() if x.startswith("throughput")]
    assert "samples/s" not in line and line.startswith("throughput: none")
