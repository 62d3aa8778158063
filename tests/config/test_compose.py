"""Every option of every config group composes (compose(), no app launch) into a valid config."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, TuneConfig, group_options
from ipu_tune.config._load import typed
from ipu_tune.config._validate import validate
from ipu_tune.models import ZOO_ALIASES


def _compose(overrides: list[str]) -> TuneConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose(config_name="config", overrides=overrides)
    return typed(TuneConfig, cfg)


def _cases() -> list[str]:
    cases = [f"{g}={o}" for g in ("model", "system", "search", "sampler") for o in group_options(g)]
    cases += [f"+experiment={o}" for o in group_options("experiment")]
    return cases


def test_every_group_has_options() -> None:
    for group in ("model", "system", "search", "sampler", "experiment"):
        assert group_options(group), f"conf/{group}/ is empty"


def test_defaults_compose_to_the_seed_model_on_two_mk2() -> None:
    cfg = _compose([])
    assert cfg.model.name == "resnet101"
    assert (cfg.system.ipu, cfg.system.num_ipus) == ("mk2", 2)
    assert cfg.search.name == "throughput"
    assert cfg.sampler.name == "tpe"
    assert cfg.study.n_trials >= 1


@pytest.mark.parametrize("override", _cases())
def test_group_option_composes(override: str) -> None:
    cfg = _compose([override])
    group, option = override.lstrip("+").split("=")
    if group == "model":
        # An old zoo name's preset composes its torchvision-spelled primary (a zoo alias).
        assert cfg.model.name in (option, ZOO_ALIASES.get(option)) or cfg.model._target_
    elif group == "system":
        assert cfg.system.ipu in ("mk1", "mk2", "bow", "c600")
    elif group == "search":
        assert cfg.search.name == option
    elif group == "sampler":
        assert cfg.sampler.name == option
    # A plan the user starts from must be structurally valid on the composed system.
    if group in ("experiment",):
        validate(cfg)


def test_overrides_use_schema_key_paths() -> None:
    cfg = _compose(["plan.precision=16.16", "workload.micro_batch_size=32", "system.num_ipus=4",
                    "plan.pipeline.splits=[layer3.8]"])
    assert cfg.plan.precision == "16.16"
    assert cfg.workload.micro_batch_size == 32
    assert cfg.system.num_ipus == 4
    assert cfg.plan.pipeline.splits == ["layer3.8"]
