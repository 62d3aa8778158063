"""Presets named in a config file mean what they mean on the command line."""

from __future__ import annotations

import pytest

from ipu_tune.config import compose, load_config, to_plain_dict
from ipu_tune.errors import IpuTuneError


@pytest.mark.parametrize("model", [{"name": "resnet50"}, "resnet50"])
def test_a_zoo_name_in_a_file_is_its_preset_as_on_the_command_line(model: object) -> None:
    loaded = load_config({"model": model})
    composed = compose(["model=resnet50"])
    assert loaded.model == composed.model
    assert loaded.workload.micro_batch_size == composed.workload.micro_batch_size == 20
    assert loaded.model.input_shape == [3, 224, 224] and loaded.model.num_classes == 1000


def test_an_alias_takes_the_preset_it_names() -> None:
    vit = load_config({"model": "vit_b16"}).model
    assert vit.name == "vit_b16" and vit.input_shape == [3, 224, 224] and vit.num_classes == 1000


def test_given_keys_win_and_mappings_merge_key_by_key() -> None:
    cfg = load_config({
        "model": {"name": "bert_large", "sequence_length": 384,
                  "kwargs": {"masked_positions": None}, "dataset": {"name": "synthetic"}},
        "workload": {"micro_batch_size": 2},
    })
    m = cfg.model
    assert m.sequence_length == 384 and cfg.workload.micro_batch_size == 2
    # A null the file gives is kept (the MLM head on every token); the preset's vocabulary stays.
    assert m.kwargs == {"vocab_size": 30522, "masked_positions": None}
    assert m.dataset.name == "synthetic" and m.dataset.preprocess_s_per_sample is None


def test_a_complete_config_loads_back_unchanged() -> None:
    # Stored and exported configs give every key: no preset value replaces one of them.
    first = load_config({"model": {"name": "resnet50", "input_shape": [3, 32, 32],
                                   "num_classes": 7}})
    assert first.model.input_shape == [3, 32, 32] and first.model.num_classes == 7
    assert load_config(to_plain_dict(first)) == first


def test_a_factory_takes_no_preset() -> None:
    from ipu_tune.config._presets import with_model_preset

    data = {"model": {"_target_": "my.factory", "name": "resnet50"}}
    assert with_model_preset(data) is data


@pytest.mark.parametrize(("section", "value", "words"), [
    ("model", 42, "model: expected a mapping, got 42"),
    ("system", "pod99", "system='pod99': not a system preset"),
])
def test_a_bad_section_is_one_line(section: str, value: object, words: str) -> None:
    with pytest.raises(IpuTuneError, match=words.replace("(", r"\(")):
        load_config({section: value})
