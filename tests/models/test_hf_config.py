"""The size rule of `model.hf.config`: every embedding table's size (a vocabulary, positions,
buckets) is at least 1, unless the config class's default or its model's own code holds 0 as
"no such table"."""

from __future__ import annotations

from typing import Any

import pytest

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.models._hf_config import hf_config


def _config(model_type: str, overrides: dict[str, Any]) -> Any:
    return hf_config(ModelConfig(name="hf", hf=HfConfig(model_type=model_type,
                                                        config=overrides)))


@pytest.mark.parametrize(("model_type", "key"), [
    ("bert", "type_vocab_size"),  # BERT's token type table: index_select on an empty one
    ("bert", "vocab_size"),
    ("layoutlm", "max_2d_position_embeddings"),
    ("markuplm", "max_xpath_tag_unit_embeddings"),
    ("t5", "relative_attention_num_buckets"),
    ("clvp", "text_config.max_position_embeddings"),  # a nested config's table
])
def test_an_empty_embedding_table_is_refused_naming_its_key(model_type: str, key: str) -> None:
    *outer, last = key.split(".")
    overrides: dict[str, Any] = {last: 0}
    for name in reversed(outer):
        overrides = {name: overrides}
    with pytest.raises(IpuTuneError, match=rf"model\.hf\.config\.{key}=0: a size from 1 to"):
        _config(model_type, overrides)


@pytest.mark.parametrize(("model_type", "key"), [
    ("deberta-v2", "type_vocab_size"),  # the class's default: no token type table
    ("idefics", "additional_vocab_size"),
    ("dpr", "projection_dim"),
    # GTE's default is 1, but its model builds the table only for a nonzero size
    # (modeling_gte.py: gte-base-en-v1.5 sets 0).
    ("gte", "type_vocab_size"),
])
def test_a_zero_the_class_or_its_model_takes_as_no_table_is_kept(model_type: str,
                                                                 key: str) -> None:
    assert getattr(_config(model_type, {key: 0}), key) == 0


def test_a_table_size_still_takes_any_size_from_one() -> None:
    assert _config("roberta", {"type_vocab_size": 1}).type_vocab_size == 1
    with pytest.raises(IpuTuneError, match=r"type_vocab_size=-2: a size from 1"):
        _config("bert", {"type_vocab_size": -2})
