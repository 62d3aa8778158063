"""`knobs.moot_keys` names only knobs the simulator ignores: in each plan below, every other
valid value of every knob it names gives the very same figures; and it names each rule's
knobs (docs/search.md, "Moot knobs")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import ipu_tune
from ipu_tune.config import load_config, to_plain_dict
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import describe, get_key, knob, moot_keys, set_key

_R50 = {"name": "resnet50", "input_shape": [3, 224, 224], "num_classes": 1000}
_BERT = {"name": "bert_base", "sequence_length": 128, "num_classes": 30522,
         "kwargs": {"vocab_size": 30522}}


def _plan(model: dict[str, Any], dataset: str, mode: str, ipus: int,
          **plan: Any) -> dict[str, Any]:
    return {"model": {**model, "dataset": {"name": dataset}},
            "workload": {"mode": mode, "micro_batch_size": 8},
            "system": {"ipu": "mk2", "num_ipus": ipus}, "plan": plan}


# (plan, input kind, the keys its rules make moot, at least)
CASES: dict[str, tuple[dict[str, Any], str, set[str]]] = {
    "inference": (_plan(_R50, "imagenet", "infer", 1, precision="16.16"), "image",
                  {"workload.optimizer", "plan.gradient_accumulation", "plan.recompute",
                   "plan.offload_optimizer_state", "plan.replicated_tensor_sharding",
                   "plan.pipeline.schedule", "plan.embedding_serialization"}),
    "synthetic": (_plan(_R50, "synthetic", "train", 2, precision="16.16", replication_factor=2),
                  "image", {"plan.prefetch_depth", "plan.eight_bit_io", "plan.async_dataloader",
                            "plan.dataloader_workers", "plan.host_instances"}),
    "generated": (_plan(_R50, "generated", "train", 2, precision="16.16", replication_factor=2),
                  "image", {"plan.async_dataloader", "plan.dataloader_workers",
                            "plan.host_instances"}),
    "fp32 tokens": (_plan(_BERT, "wikipedia", "train", 1, precision="32.32"), "tokens",
                    {"plan.partials", "plan.eight_bit_io", "plan.replicated_tensor_sharding",
                     "plan.pipeline.schedule"}),
    "16.32": (_plan(_R50, "imagenet", "train", 1, precision="16.32"), "image",
              {"plan.partials"}),
    "per-IPU proportions": (_plan(_BERT, "wikipedia", "train", 2, precision="16.16",
                                  gradient_accumulation=4,
                                  pipeline={"splits": ["encoder.layer.6"]},
                                  available_memory_proportion_per_ipu=[0.2, 0.4]),
                            "tokens", {"plan.available_memory_proportion"}),
    # Token input with no vocabulary head (a span head): nothing to slice.
    "no vocabulary head": (_plan({"name": "bert_base_squad", "sequence_length": 128},
                                 "wikipedia", "train", 1, precision="16.16"),
                           "tokens", {"plan.embedding_serialization"}),
}


def _others(key: str, value: Any) -> list[Any]:
    k = knob(key)
    if k.type is bool:
        return [not value]
    if k.domain is not None:
        return [v for v in k.domain if v != value]
    if k.type is float:
        return [0.3 if value != 0.3 else 0.5]
    return [value * 2, value * 4]


def _figures(cfg: Any) -> dict[str, Any]:
    r = ipu_tune.evaluate(cfg).to_dict()
    r.pop("extras", None)  # bookkeeping (the instances asked for), not a figure
    return r


@pytest.mark.parametrize("name", list(CASES))
def test_a_moot_knob_changes_no_figure(name: str) -> None:
    raw, kind, expected = CASES[name]
    cfg = load_config(copy.deepcopy(raw))
    facts = ipu_tune.profile(raw["model"]).facts
    assert facts.input_kind == kind
    moot = moot_keys(cfg, facts)
    assert expected <= moot, expected - moot
    base = _figures(cfg)
    tried = 0
    for key in sorted(moot):
        for value in _others(key, get_key(cfg, key)):
            plain = to_plain_dict(cfg)
            changed = load_config(plain)
            set_key(changed, key, value)
            try:
                changed = load_config(to_plain_dict(changed))  # validated as given
            except IpuTuneError:
                continue  # a value the plan rules refuse (GA > 1 in inference, ...)
            assert _figures(changed) == base, (key, value)
            tried += 1
    assert tried >= len(expected)


def test_the_plan_line_shows_no_moot_knob() -> None:
    raw, kind, _ = CASES["fp32 tokens"]
    cfg = load_config({**copy.deepcopy(raw),
                       "plan": {**raw["plan"], "eight_bit_io": True, "partials": "half"}})
    line = describe(cfg, kind)
    assert "8-bit I/O" not in line and "partials" not in line and "schedule" not in line
    assert "8-bit I/O True" in describe(cfg)  # the input kind unknown: never hidden
    raw, kind, _ = CASES["per-IPU proportions"]
    line = describe(load_config(copy.deepcopy(raw)), kind)
    assert "AMP per IPU [0.2, 0.4]" in line and "AMP 0.6" not in line


def test_a_language_models_vocabulary_head_runs_the_serialization() -> None:
    facts = ipu_tune.profile(_BERT).facts  # the zoo's BERT: its MLM head is the vocabulary's
    assert facts.vocabulary is True
    assert "plan.embedding_serialization" not in moot_keys(load_config(
        _plan(_BERT, "wikipedia", "train", 1)), facts)
