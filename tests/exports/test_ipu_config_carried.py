"""An ipu_config.json read in (`plan.from_ipu_config`) comes back whole: the fields the plan
sets hold the plan's values, the others (which nothing simulates) are carried unchanged, and
the run names those in one line at its start."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ipu_tune.cli.run import _start
from ipu_tune.config import EvalConfig, ModelConfig, PlanConfig, SystemConfig, validate
from ipu_tune.errors import IpuTuneError
from ipu_tune.exports import apply_ipu_config, ipu_config_note, render_run_with_optimum
from ipu_tune.exports._ipu_config import render_ipu_config
from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config
from ipu_tune.tuner._study import problem_fingerprint

# What the simulator reads (layers, IPUs, proportions, counts, partials, state, recompute)...
PLAN_FIELDS = {"layers_per_ipu": [0, 8, 8, 8], "ipus_per_replica": 4,
               "matmul_proportion": [0.2, 0.2, 0.2, 0.2], "replication_factor": 4,
               "gradient_accumulation_steps": 128, "device_iterations": 1,
               "enable_half_partials": True, "optimizer_state_offchip": True,
               "replicated_tensor_sharding": True, "recompute_checkpoint_every_layer": True,
               "embedding_serialization_factor": 4}
# ... and what it does not, of every JSON type IPUConfig declares.
OTHERS = {"seed": 42, "executable_cache_dir": "./exe_cache",
          "auto_loss_scaling": False, "output_mode": "final", "inference_device_iterations": 4,
          "inference_matmul_proportion": 0.3,
          "parallelize_kwargs": {"use_cache": True, "max_len": 7}}


def _applied(tmp_path: Path, content: dict[str, Any],
             model: ModelConfig | None = None) -> EvalConfig:
    (tmp_path / "ipu_config.json").write_text(json.dumps(content))
    model = model or ModelConfig(name="gpt2_medium", sequence_length=1024)
    cfg = EvalConfig(model=model, plan=PlanConfig(from_ipu_config=str(tmp_path)),
                     system=SystemConfig(num_ipus=16))  # fmt: skip
    return apply_ipu_config(cfg)


def _exported(cfg: EvalConfig) -> dict[str, Any]:
    text = render_ipu_config(plan_from_config(cfg), profile_model(cfg.model), cfg)
    data: dict[str, Any] = json.loads(text)
    return data


def test_fields_the_plan_does_not_set_come_back_unchanged_with_their_json_types(
    tmp_path: Path,
) -> None:
    cfg = _applied(tmp_path, {**PLAN_FIELDS, **OTHERS})
    cfg.plan.replication_factor = 2  # as a search moves it
    out = _exported(cfg)
    for key, value in OTHERS.items():
        assert out[key] == value and type(out[key]) is type(value), key
    assert out["replication_factor"] == 2  # the plan's value replaces the file's
    assert {k: out[k] for k in PLAN_FIELDS if k != "replication_factor"} == {
        k: v for k, v in PLAN_FIELDS.items() if k != "replication_factor"}
    assert set(out) == {*PLAN_FIELDS, *OTHERS}


def test_the_run_names_the_fields_it_does_not_simulate_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _applied(tmp_path, {**OTHERS, **PLAN_FIELDS})
    line = (f"plan.from_ipu_config={str(tmp_path)!r}: not simulated, carried into the export "
            f"unchanged: {', '.join(OTHERS)}")
    assert ipu_config_note(cfg) == line
    _start(SimpleNamespace(cfg=cfg))  # type: ignore[arg-type]  # what the main command prints
    assert capsys.readouterr().out == line + "\n"
    assert ipu_config_note(_applied(tmp_path, PLAN_FIELDS)) is None  # nothing to say


def test_evaluate_names_the_fields_it_does_not_simulate_in_that_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evaluate` of a plan read from an ipu_config.json says what its figures leave out
    (serialised embeddings, ...), as the main command does."""
    from ipu_tune.cli.evaluate_cmd import main as evaluate_main

    (tmp_path / "ipu_config.json").write_text(json.dumps({**OTHERS, **PLAN_FIELDS}))
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: {name: gpt2_medium, sequence_length: 1024}\n"
                    "system: {num_ipus: 16}\n")
    assert evaluate_main([str(plan), f"plan.from_ipu_config={tmp_path}"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"plan.from_ipu_config={str(tmp_path)!r}: not simulated: "
                     f"{', '.join(OTHERS)}")


def test_a_model_without_optimum_exports_says_so_in_that_line(tmp_path: Path) -> None:
    bert = ModelConfig(name="bert_large", sequence_length=128, num_classes=30522)
    layers = {**PLAN_FIELDS, "layers_per_ipu": [0, 8, 8, 8]}
    note = ipu_config_note(_applied(tmp_path, {**layers, "seed": 1}, bert))
    assert note == (f"plan.from_ipu_config={str(tmp_path)!r}: not simulated: seed; model: "
                    "not a Transformers model; no ipu_config.json or run_with_optimum.py: "
                    "optimum-graphcore 0.7.1 pipelines only the Transformers classes it "
                    "registers (docs/huggingface.md)")


def test_a_per_ipu_list_of_another_ipu_count_is_left_out_and_said(tmp_path: Path) -> None:
    splits = {"serialized_embedding_splits_per_ipu": [1, 0, 0, 0]}
    factor = "embedding_serialization_factor"
    cfg = _applied(tmp_path, {**{k: v for k, v in PLAN_FIELDS.items() if k != factor},
                              **splits})
    exported = _exported(cfg)
    assert exported["serialized_embedding_splits_per_ipu"] == [1, 0, 0, 0]
    # IPUConfig takes the factor or the splits: the file's splits, with no factor beside them.
    assert factor not in exported
    two = replace(cfg, plan=replace(cfg.plan, pipeline=replace(
        cfg.plan.pipeline, splits=["transformer.h.12"]), available_memory_proportion_per_ipu=[]))
    assert "serialized_embedding_splits_per_ipu" not in _exported(two)
    program = " ".join(render_run_with_optimum(
        plan_from_config(two), profile_model(two.model), two).split())
    assert ("Left out of ipu_config.json: serialized_embedding_splits_per_ipu of the file read"
            " in (plan.from_ipu_config), one value per IPU of another IPU count than this"
            " plan's 2.") in program


def test_carried_fields_are_bounded_only_from_a_file_and_no_part_of_the_problem(
    tmp_path: Path,
) -> None:
    big = {"parallelize_kwargs": {f"k{i}": "x" * 100 for i in range(200)}}
    with pytest.raises(IpuTuneError, match=r"parallelize_kwargs: the fields ipu-tune does not "
                                           r"simulate hold \d+ bytes of JSON; at most 16384"):
        _applied(tmp_path, {**PLAN_FIELDS, **big})
    given = EvalConfig(plan=PlanConfig(ipu_config_carried={"seed": 1}))
    with pytest.raises(IpuTuneError, match=r"plan\.ipu_config_carried=.*: null: it is read from "
                                           r"the file of plan\.from_ipu_config"):
        validate(given)
    cfg = _applied(tmp_path, {**PLAN_FIELDS, **OTHERS})
    bare = replace(cfg, plan=replace(cfg.plan, ipu_config_carried=None))
    plain = [{"plan": {**vars(c.plan), "pipeline": vars(c.plan.pipeline)}} for c in (cfg, bare)]
    assert problem_fingerprint(plain[0], []) == problem_fingerprint(plain[1], [])


def test_best_yaml_of_a_study_started_from_a_file_evaluates_to_the_best_plan(
    tmp_path: Path,
) -> None:
    """best.yaml of a study started from an ipu_config.json held the file's path: evaluated,
    the file put the starting plan back over the best one (and a moved file failed it). It
    holds the best plan alone, and says where it started."""
    import yaml

    from ipu_tune.cli.evaluate_cmd import apply_overrides
    from ipu_tune.exports import export_context
    from ipu_tune.exports._best_yaml import BestYamlExporter
    from ipu_tune.simulator import simulate

    cfg = _applied(tmp_path, {**PLAN_FIELDS, **OTHERS})
    best = replace(cfg, plan=replace(cfg.plan, gradient_accumulation=256,
                                     device_iterations=8))  # as a search moves them
    profile = profile_model(best.model)
    plan = plan_from_config(best)
    result = simulate(profile, _system(best), plan)
    text = BestYamlExporter().render(export_context(best, result, profile))
    (tmp_path / "ipu_config.json").unlink()  # moved away after the study
    (tmp_path / "best.yaml").write_text(text)
    assert f"# plan.from_ipu_config was {str(tmp_path)!r}" in text
    assert yaml.safe_load(text)["plan"]["from_ipu_config"] is None
    again = apply_overrides(str(tmp_path / "best.yaml"), [])
    assert plan_from_config(again) == plan


def _system(cfg: EvalConfig) -> Any:
    from ipu_tune.hardware import system_from_config

    return system_from_config(cfg.system)


def test_fields_optimum_pops_as_deprecated_are_named_so_and_carried(tmp_path: Path) -> None:
    """Graphcore's Hub files hold fields optimum-graphcore 0.7.1 pops with a warning
    (`enable_half_first_order_momentum`, `sharded_execution_for_inference`): named, never
    dropped unsaid, and carried as the file gave them."""
    deprecated = {"enable_half_first_order_momentum": True,
                  "sharded_execution_for_inference": True}
    cfg = _applied(tmp_path, {**PLAN_FIELDS, "seed": 42, **deprecated})
    assert ipu_config_note(cfg) == (
        f"plan.from_ipu_config={str(tmp_path)!r}: not simulated, carried into the export "
        "unchanged: seed, enable_half_first_order_momentum (deprecated: optimum-graphcore "
        "ignores it), sharded_execution_for_inference (deprecated: optimum-graphcore ignores "
        "it)")
    out = _exported(cfg)
    assert {k: out[k] for k in deprecated} == deprecated


def test_sharding_with_one_replica_reads_as_off_as_optimum_runs_it(tmp_path: Path) -> None:
    """Graphcore's gpt2-small-ipu sets `replicated_tensor_sharding: true` with one replica:
    optimum warns and turns it off (ipu_configuration.py L498, L612); it was refused."""
    one = {**PLAN_FIELDS, "replication_factor": 1}
    cfg = _applied(tmp_path, one)
    assert cfg.plan.replication_factor == 1 and not cfg.plan.replicated_tensor_sharding
    assert _applied(tmp_path, PLAN_FIELDS).plan.replicated_tensor_sharding  # 4 replicas: on
    # The replicas the plan runs decide, the command line's too: optimum shards 2 of them.
    (tmp_path / "ipu_config.json").write_text(json.dumps(one))
    given = EvalConfig(model=ModelConfig(name="gpt2_medium", sequence_length=1024),
                       plan=PlanConfig(from_ipu_config=str(tmp_path), replication_factor=2),
                       system=SystemConfig(num_ipus=16))
    pinned = apply_ipu_config(given, frozenset({"plan.replication_factor"}))
    assert pinned.plan.replication_factor == 2 and pinned.plan.replicated_tensor_sharding
