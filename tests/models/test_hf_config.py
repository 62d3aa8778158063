"""The size rule of `model.hf.config` for embedding tables (a vocabulary, positions, buckets):
a size from 1, or 0 where the model then builds no such table. A 0 is judged on the model
built from it: an empty table is refused naming the field, its first lookup would fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import profile_model
from ipu_tune.models._hf_config import hf_config

_EMPTY = r"=0: a size from 1 to 16,777,216 \(2\^24\), an integer: the model builds an empty " \
         r"embedding table from 0 \({}\), whose first lookup fails"


def _model(model_type: str, overrides: dict[str, Any]) -> ModelConfig:
    return ModelConfig(name="hf", hf=HfConfig(model_type=model_type, config=overrides))


@pytest.mark.parametrize(("model_type", "overrides", "key", "table"), [
    # BERT's token type table: index_select on an empty one.
    ("bert", {"num_hidden_layers": 1, "type_vocab_size": 0}, "type_vocab_size",
     "bert.embeddings.token_type_embeddings"),
    ("t5", {"num_layers": 1, "num_decoder_layers": 1, "relative_attention_num_buckets": 0},
     "relative_attention_num_buckets", r"encoder.block.0.layer.0.SelfAttention."
     r"relative_attention_bias"),
])
def test_an_empty_embedding_table_is_refused_naming_its_key(
        model_type: str, overrides: dict[str, Any], key: str, table: str) -> None:
    with pytest.raises(IpuTuneError, match=rf"^model\.hf\.config\.{key}" + _EMPTY.format(table)):
        profile_model(_model(model_type, overrides))


def test_a_config_files_empty_table_is_named_by_its_field(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "bert", "num_hidden_layers": 1, "type_vocab_size": 0}))
    cfg = ModelConfig(name="hf", hf=HfConfig(config_file=str(tmp_path / "config.json")))
    with pytest.raises(IpuTuneError, match=r"^model\.hf\.config_file='.*': field "
                       r"type_vocab_size" + _EMPTY.format("bert.embeddings.token_type_"
                                                          "embeddings")):
        profile_model(cfg)


@pytest.mark.parametrize(("model_type", "overrides"), [
    # The class's default: no token type table.
    ("deberta-v2", {"num_hidden_layers": 1, "type_vocab_size": 0}),
    # GTE's default is 1, but its model builds the table only for a nonzero size
    # (modeling_gte.py: gte-base-en-v1.5 sets 0).
    ("gte", {"num_hidden_layers": 1, "type_vocab_size": 0}),
])
def test_a_zero_its_model_takes_as_no_table_is_kept(model_type: str,
                                                    overrides: dict[str, Any]) -> None:
    assert profile_model(_model(model_type, overrides)).parameters > 0


def test_a_table_size_still_takes_any_size_from_one() -> None:
    assert hf_config(_model("roberta", {"type_vocab_size": 1})).type_vocab_size == 1
    with pytest.raises(IpuTuneError, match=r"type_vocab_size=-2: a size from 1 to 16,777,216 "
                       r"\(2\^24\), an integer, or 0 where the model then builds no such table"):
        hf_config(_model("bert", {"type_vocab_size": -2}))


def test_two_zeros_one_of_which_empties_a_table_are_both_named() -> None:
    """DeBERTa's type_vocab_size 0 builds no table, its max_position_embeddings 0 an empty one:
    the message does not blame the first it finds."""
    cfg = _model("deberta", {"num_hidden_layers": 1, "type_vocab_size": 0,
                             "max_position_embeddings": 0})
    with pytest.raises(IpuTuneError, match=r"^model\.hf\.config\.type_vocab_size=0, model\.hf\."
                       r"config\.max_position_embeddings=0: one of them sizes an empty embedding "
                       r"table \(deberta\.embeddings\.position_embeddings\)"):
        profile_model(cfg)
