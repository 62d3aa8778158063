"""A study is one problem: its fingerprint (model, workload, system, search, pins) is stored
with it; the default name differs when the problem differs; an explicit name of another
problem is refused with one line listing the differing keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ipu_tune.config import CONF_DIR, TuneConfig
from ipu_tune.config._load import typed
from ipu_tune.errors import IpuTuneError
from ipu_tune.tuner import prepare, run
from tests.conftest import run_cli


def _cfg(results: Path, n: int, *extra: str) -> TuneConfig:
    overrides = [f"results_dir={results}", f"study.n_trials={n}", "study.progress_bar=false",
                 *extra]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=overrides))


def _run(results: Path, n: int, *extra: str):  # type: ignore[no-untyped-def]
    pinned = frozenset(e.split("=")[0] for e in extra if e.startswith(("plan.", "workload.")))
    return run(prepare(_cfg(results, n, *extra), pinned))


@pytest.mark.parametrize("change", [
    ("plan.precision=16.16", "plan.pipeline.splits=[layer3.8]"),
    ("workload.micro_batch_size=32",),
    ("model.input_shape=[3,96,96]",),
    ("search.objectives=[throughput,memory]",),
])
def test_a_changed_problem_is_another_default_study(tmp_path: Path,
                                                    change: tuple[str, ...]) -> None:
    first = _run(tmp_path, 4)
    other = _run(tmp_path, 4, *change)
    # A changed config is a new study, not "(0 run now)" with the old result printed.
    assert other.study_name != first.study_name
    assert other.ran_here == 4 and other.n_complete == 4
    assert other.study_name.startswith(first.study_name + "-")


def test_an_explicit_name_of_another_problem_is_refused_listing_the_keys(tmp_path: Path) -> None:
    _run(tmp_path, 3, "study.name=mine")
    with pytest.raises(IpuTuneError) as err:
        _run(tmp_path, 3, "study.name=mine", "workload.micro_batch_size=32",
             "model.input_shape=[3,96,96]")
    msg = str(err.value)
    assert "\n" not in msg and "study.name='mine'" in msg
    assert "workload.micro_batch_size: 64 -> 32" in msg
    assert "model.input_shape: [3, 64, 64] -> [3, 96, 96]" in msg


def test_resume_of_the_same_problem_tops_up(tmp_path: Path) -> None:
    first = _run(tmp_path, 3, "workload.micro_batch_size=32")
    again = _run(tmp_path, 5, "workload.micro_batch_size=32")
    assert again.study_name == first.study_name
    assert (again.n_complete, again.ran_here) == (5, 2)
    plain = _run(tmp_path, 2, "study.name=named")
    more = _run(tmp_path, 4, "study.name=named")
    assert (plain.study_name, more.n_complete, more.ran_here) == ("named", 4, 2)


def test_a_custom_target_never_joins_the_resnet_study(tmp_path: Path) -> None:
    default = run_cli([f"results_dir={tmp_path}", "study.n_trials=2", "study.progress_bar=false"],
                      tmp_path)
    assert default.returncode == 0, default.stderr
    custom = run_cli([f"results_dir={tmp_path}", "study.n_trials=2", "study.progress_bar=false",
                      "system.num_ipus=1", "model._target_=tests.models.factories.tiny_mlp",
                      "model.input_shape=[8]"],
                     tmp_path)
    assert custom.returncode == 0, custom.stderr
    dirs = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert any(d.startswith("tiny_mlp-") for d in dirs), dirs
    assert not any(d.startswith("resnet101-mk2x1") for d in dirs), dirs


@pytest.mark.parametrize("change", [
    ("+experiment=seed_resnet101",),   # another starting plan, same pins
    ("sampler=random",),
    ("sampler.seed=7",),
])
def test_a_changed_starting_plan_or_sampler_is_a_new_study(tmp_path: Path,
                                                           change: tuple[str, ...]) -> None:
    first = _run(tmp_path, 3, "search=fit")
    other = _run(tmp_path, 3, "search=fit", *change)
    assert other.study_name != first.study_name
    assert other.ran_here == 3 and other.n_complete == 3


def test_an_explicit_name_with_another_sampler_is_refused_in_one_line(tmp_path: Path) -> None:
    _run(tmp_path, 3, "study.name=mine")
    with pytest.raises(IpuTuneError) as err:
        _run(tmp_path, 3, "study.name=mine", "sampler=random")
    msg = str(err.value)
    assert "\n" not in msg and "sampler.name: 'tpe' -> 'random'" in msg
    # How to go on: the other sampler is a new study.
    assert ("a study is searched by one sampler from one seed (every sampler.* key): to go on "
            "with this one, start a new study (study.name=mine-random); choose another "
            "study.name") in msg
    with pytest.raises(IpuTuneError, match=r"start a new study \(study.name=mine-seed7\)"):
        _run(tmp_path, 3, "study.name=mine", "sampler.seed=7")
    with pytest.raises(IpuTuneError) as err:
        _run(tmp_path, 3, "study.name=mine", "workload.micro_batch_size=32")
    assert "sampler" not in str(err.value)


def test_hosts_are_compared_as_the_servers_they_mean(tmp_path: Path) -> None:
    # Studies stored when the presets stated `hosts: 1` resume under `hosts: null` (one server
    # per 16 IPUs: 1 on the mk2 preset's 2 IPUs); another server count is another problem.
    stated = _run(tmp_path, 3, "system.hosts=1")
    default = _run(tmp_path, 5, "system.hosts=null")
    assert default.study_name == stated.study_name
    assert (default.n_complete, default.ran_here) == (5, 2)
    other = _run(tmp_path, 2, "system.hosts=2")
    assert other.study_name != stated.study_name


def test_transformers_models_are_named_by_their_type(tmp_path: Path) -> None:
    # Before, every Transformers model was "hf-...": the second one got a bare hash.
    small = "model.hf.config={num_hidden_layers: 2, hidden_size: 64, num_attention_heads: 2}"
    bert = _run(tmp_path, 2, "model=hf", "model.hf.model_type=bert", small,
                "model.sequence_length=32")
    vit = _run(tmp_path, 2, "model=hf", "model.hf.model_type=vit", small)
    assert (bert.study_name, vit.study_name) == ("bert-mk2x2-throughput", "vit-mk2x2-throughput")
    listing = run_cli(["studies", "--results-dir", str(tmp_path)], tmp_path)
    assert [line.split()[1] for line in listing.stdout.splitlines()[1:]] == ["bert", "vit"]
