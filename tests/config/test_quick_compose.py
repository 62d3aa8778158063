"""A single run is composed without importing Hydra: from Hydra's own composition of its group
choices (cached) plus the plain `key=value` overrides. It must give exactly the config Hydra
composes from the same arguments, and leave everything else to Hydra."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.config import CONF_DIR, compose, quick_compose, to_plain_dict
from ipu_tune.errors import IpuTuneError

SAME = [
    [],
    ["study.n_trials=7", "results_dir=/tmp/somewhere/results", "study.progress_bar=false"],
    ["plan.precision=16.16", "system.num_ipus=4", "plan.available_memory_proportion=1",
     "study.name=my-study_1", "sampler.seed=3", "study.timeout_s=1.5", "plan.eight_bit_io=True",
     "study.storage=null", "workload.micro_batch_size=32", "plan.pipeline.schedule=sharded"],
    ["plan.gradient_accumulation=-3", "search.warm_start=FALSE", "model.num_classes=0"],
    # values OmegaConf converts for the schema's type: the same conversions either way
    ["study.name=123", "plan.precision=16", "sampler.params.n_startup_trials=5",
     "system.ipu=MK2"],
    # group choices by name: Hydra's composition of them, cached, then the values
    ["model=resnet101", "search=throughput"],
    ["model=bert_base", "plan.precision=16.16", "model.sequence_length=64"],
    ["model=resnet50", "system=pod16", "search=pareto", "sampler=random", "study.n_trials=3"],
    ["+experiment=seed_resnet101", "study.n_trials=3"],
    ["+experiment=seed_mnist", "plan.gradient_accumulation=20"],
]

HYDRA = [
    ["model=no_such_model"],  # an unknown option: Hydra and our group check word the error
    ["experiment=seed_resnet101"],  # a group without a default needs `+`
    ["+experiment=no_such_experiment"],
    ["+model.kwargs.width=2"],  # a new key
    ["plan.pipeline.splits=[layer3.8]"],  # a list
    ["study.n_trials=abc"],  # a bad value: Hydra and OmegaConf word the error
    ["study.n_trails=5"],  # a key the config does not have
    ["hydra.run.dir=x"],
    ["-m", "system.num_ipus=2,4"],
    ["study.name='quoted'"],
    ["study.timeout_s=1e3"],
    ["study.name=${results_dir}"],
    ["plan.precision"],
    ["study.workers=true"],  # values the schema refuses: Hydra and OmegaConf word the error
    ["study.progress_bar=yes"],  # OmegaConf would read these as true and false: refused
    ["plan.eight_bit_io=0"],
    ["plan.recompute=null"],
    ["model.input_shape=3"],
    ["study.n_trials=1.0"],
]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.mark.parametrize("overrides", SAME, ids=lambda o: " ".join(o) or "defaults")
def test_the_quick_composition_is_hydras(overrides: list[str], cache: Path) -> None:
    quick = quick_compose(overrides, cache)
    assert quick is not None, overrides
    assert to_plain_dict(quick) == to_plain_dict(compose(overrides))
    assert list(cache.glob("compose-*.json")), "the defaults are cached"
    again = quick_compose(overrides, cache)  # from the cache file this time
    assert again == quick


@pytest.mark.parametrize("argv", HYDRA, ids=lambda o: " ".join(o))
def test_anything_else_is_composed_by_hydra(argv: list[str], cache: Path) -> None:
    assert quick_compose(argv, cache) is None


@pytest.mark.parametrize("override", ["study.progress_bar=yes", "plan.eight_bit_io=0"])
def test_a_switch_given_another_value_is_refused_either_way(override: str, cache: Path) -> None:
    with pytest.raises(IpuTuneError, match="allowed: true or false"):
        compose([override])


def test_a_changed_conf_is_composed_again(tmp_path: Path, cache: Path) -> None:
    """The cache is keyed by the content of conf/: an edited file is never read stale."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    before = quick_compose([], cache, conf)
    assert before is not None and before.study.n_trials == 100
    text = (conf / "config.yaml").read_text().replace("n_trials: 100", "n_trials: 42")
    (conf / "config.yaml").write_text(text)
    after = quick_compose([], cache, conf)
    assert after is not None and after.study.n_trials == 42
    assert len(list(cache.glob("compose-*.json"))) == 2


def test_a_bad_cache_file_is_composed_again(cache: Path) -> None:
    first = quick_compose(["study.n_trials=3"], cache)
    (cached,) = cache.glob("compose-*.json")
    cached.write_text("{not json")
    assert quick_compose(["study.n_trials=3"], cache) == first


def test_an_interpolation_in_conf_goes_to_hydra(tmp_path: Path, cache: Path) -> None:
    """A composed value that refers to another key is not cached: a key set afterwards could
    change what it resolves to."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    text = (conf / "config.yaml").read_text().replace("name: null", "name: ${results_dir}")
    (conf / "config.yaml").write_text(text)
    assert quick_compose(["results_dir=elsewhere"], cache, conf) is None
