"""`plan.embedding_serialization`: the vocabulary matmul in slices of its output channels
(PopTorch serializedMatMul; optimum-graphcore's embedding_serialization_factor). Each slice
holds a share of the head's weight and partials, so its temporary falls with the slices; each
pays its compute set, weight exchange and AMP fill, so the head's stage takes longer."""

from __future__ import annotations

import pytest

import ipu_tune
from ipu_tune.config import load_config
from ipu_tune.simulator import SimResult

# GPT-2 on four IPUs, its tied head on IPU0 beside the embeddings (optimum-graphcore's layout).
_GPT2 = {"model": {"name": "gpt2", "sequence_length": 512}, "system": {"num_ipus": 4},
         "workload": {"micro_batch_size": 1},
         "plan": {"precision": "16.16", "gradient_accumulation": 64,
                  "pipeline": {"splits": ["transformer.h.0", "transformer.h.4",
                                          "transformer.h.8"]}}}


def _run(base: dict, factor: int) -> SimResult:
    cfg = load_config({**base, "plan": {**base.get("plan", {}),
                                        "embedding_serialization": factor}})
    return ipu_tune.evaluate(cfg)


def test_the_heads_temporary_falls_with_its_slices_and_its_stage_slows() -> None:
    runs = {s: _run(_GPT2, s) for s in (1, 2, 4, 8)}
    temps = [runs[s].memory[0].categories["temporaries"] for s in (1, 2, 4, 8)]
    # The head's matmul is IPU0's largest: its temporary is the whole's share per slice.
    assert temps[1] == pytest.approx(temps[0] / 2, rel=0.02)
    assert temps[3] == pytest.approx(temps[0] / 8, rel=0.02)
    backward = [runs[s].stages[0].backward_s for s in (1, 2, 4, 8)]
    assert backward == sorted(backward) and backward[3] > backward[0] * 1.1
    # The other IPUs hold no vocabulary matmul: nothing of theirs moves.
    assert all(runs[8].memory[i] == runs[1].memory[i] for i in (1, 2, 3))


def test_a_model_without_a_vocabulary_is_not_changed() -> None:
    base = {"model": {"name": "bert_base_squad", "sequence_length": 128},
            "system": {"num_ipus": 1}, "workload": {"micro_batch_size": 2}}
    one, eight = _run(base, 1), _run(base, 8)
    assert eight.step_time_s == one.step_time_s and eight.memory == one.memory
