"""Zoo names as torchvision spells its builders; the earlier ipu-tune names stay as aliases."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, ModelConfig, load_config, register
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import ZOO, ZOO_ALIASES, profile_model, zoo_entry

ALIASES = {"resnext50": "resnext50_32x4d", "resnext101": "resnext101_32x8d", "vit_b16": "vit_b_16"}


def test_primary_names_are_torchvisions_and_aliases_resolve() -> None:
    for primary in ALIASES.values():
        assert primary in ZOO
    assert dict(ZOO_ALIASES) == ALIASES
    for alias, primary in ALIASES.items():
        assert alias not in ZOO
        assert zoo_entry(alias) is ZOO[primary]


@pytest.mark.parametrize("alias", list(ALIASES))
def test_an_alias_profiles_the_same_model(alias: str) -> None:
    shape = [3, 32, 32]
    by_alias = profile_model(ModelConfig(name=alias, input_shape=shape, num_classes=10))
    primary = profile_model(ModelConfig(name=ALIASES[alias], input_shape=shape, num_classes=10))
    assert by_alias.parameters == primary.parameters
    assert by_alias.blocks == primary.blocks


@pytest.mark.parametrize("alias", list(ALIASES))
def test_model_group_alias_composes_the_primary_preset(alias: str) -> None:
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        by_alias = compose("config", overrides=[f"model={alias}"])
        primary = compose("config", overrides=[f"model={ALIASES[alias]}"])
    assert by_alias.model == primary.model
    assert by_alias.model.name == ALIASES[alias]


def test_an_unknown_name_lists_names_and_aliases() -> None:
    with pytest.raises(IpuTuneError) as err:
        profile_model(load_config({"model": {"name": "resnext50x"}}).model)
    message = str(err.value)
    assert "resnext50_32x4d" in message and "resnext50 (= resnext50_32x4d)" in message
