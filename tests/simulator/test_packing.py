"""Packed sequences (Krell et al. 2021): a micro-batch of packs does the device work of as many
padded sequences, and holds `sequences_per_pack` dataset sequences per pack; samples/s counts
sequences, as Graphcore reports its packed BERT."""

from __future__ import annotations

from typing import Any

import pytest

from ipu_tune import evaluate_config
from ipu_tune.cli._summary import _batch_line
from ipu_tune.config import load_config
from tests.exports._render import poptorch_snippet


def _config(per_pack: float, **dataset: Any) -> Any:
    return load_config({
        "model": {"name": "bert_base", "sequence_length": 512,
                  "kwargs": {"masked_positions": 76},
                  "dataset": {"sequences_per_pack": per_pack, **dataset}},
        "workload": {"micro_batch_size": 4, "optimizer": "lamb"},
        "system": {"ipu": "mk2", "num_ipus": 4},
        "plan": {"precision": "16.16", "partials": "half", "gradient_accumulation": 64,
                 "device_iterations": 2, "replication_factor": 1, "recompute": "every_block",
                 "pipeline": {"splits": ["encoder.layer.2", "encoder.layer.6",
                                         "encoder.layer.9"]}},
    })


@pytest.mark.parametrize("dataset", [{"name": "synthetic"},
                                     {"name": "wikipedia", "preprocess_s_per_sample": 0.002}])
def test_packs_cost_the_device_and_host_what_padded_sequences_cost(
        dataset: dict[str, Any]) -> None:
    padded = evaluate_config(_config(1.0, **dataset))
    packed = evaluate_config(_config(1.97, **dataset))
    assert padded.fits and packed.fits
    # The same inputs on the device and on the host: time, phases and memory are unchanged.
    assert packed.step_time_s == padded.step_time_s
    assert packed.phases == padded.phases
    assert packed.memory == padded.memory
    assert packed.bottleneck == padded.bottleneck
    # Each input holds 1.97 sequences: every rate and count of samples is 1.97 times more.
    assert packed.throughput == pytest.approx(1.97 * padded.throughput, rel=1e-12)
    assert packed.device_throughput == pytest.approx(1.97 * padded.device_throughput, rel=1e-12)
    assert packed.samples_per_step == pytest.approx(1.97 * padded.samples_per_step, rel=1e-12)
    assert packed.throughput == pytest.approx(packed.samples_per_step / packed.step_time_s,
                                              rel=1e-9)


def test_the_summary_and_the_program_say_the_micro_batch_counts_packs() -> None:
    cfg = _config(2.0)
    assert _batch_line(cfg).endswith(
        "; packs of 2 sequences on average: samples/s counts sequences")
    assert "packs" not in _batch_line(_config(1.0))
    program = poptorch_snippet(cfg, evaluate_config(cfg))
    assert "# Packed sequences, 2 per pack on average as simulated" in program
    assert "Packed sequences" not in poptorch_snippet(_config(1.0))
