"""ipu_config.json: keys and types as optimum-graphcore 0.7.1's IPUConfig defines them (read
from its source with `ast`, never imported), layers per IPU from the splits, and the import."""

from __future__ import annotations

import ast
import json
import re
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import transformers

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig, PlanConfig, SystemConfig
from ipu_tune.errors import IpuTuneError
from ipu_tune.exports import (
    IPU_CONFIG_FIELDS,
    apply_ipu_config,
    plan_values_from_ipu_config,
    read_ipu_config,
    render_ipu_config,
    render_run_with_optimum,
)
from ipu_tune.exports._ipu_config import _PIPELINE_TASKS
from ipu_tune.models import TASKS, ModelProfile, profile_model
from ipu_tune.plan import ExecutionPlan, plan_from_config
from tests.conftest import REPO

WHEEL_DIR = REPO / ".cache" / "optimum-graphcore"
SOURCE = "optimum/graphcore/ipu_configuration.py"


def optimum_source(path: str) -> ast.Module:
    """A module of the wheel scripts/setup.sh downloads (`pip download --no-deps
    optimum-graphcore==0.7.1`), parsed, never imported."""
    wheels = sorted(WHEEL_DIR.glob("optimum_graphcore-0.7.1-*.whl"))
    if not wheels:
        pytest.skip(f"no optimum-graphcore 0.7.1 wheel in {WHEEL_DIR}: run scripts/setup.sh")
    with zipfile.ZipFile(wheels[0]) as whl:
        return ast.parse(whl.read(path).decode())


def ipu_config_signature() -> dict[str, ast.expr]:
    """IPUConfig.__init__'s parameters and annotation nodes."""
    tree = optimum_source(SOURCE)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "IPUConfig")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {a.arg: a.annotation for a in init.args.args[1:] if a.annotation is not None}


def fits(value: Any, node: ast.expr) -> bool:
    """Does a JSON value fit an annotation node (typeguard's rules, bool not an int)?"""
    if isinstance(node, ast.Name):
        return {
            "int": lambda: isinstance(value, int) and not isinstance(value, bool),
            "float": lambda: isinstance(value, int | float) and not isinstance(value, bool),
            "bool": lambda: isinstance(value, bool),
            "str": lambda: isinstance(value, str),
            "Any": lambda: True,
        }[node.id]()
    assert isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    kind = node.value.id
    if kind == "Optional":
        return value is None or fits(value, args[0])
    if kind == "Union":
        return any(fits(value, a) for a in args)
    if kind == "List":
        return isinstance(value, list) and all(fits(v, args[0]) for v in value)
    if kind == "Dict":
        return isinstance(value, dict) and all(fits(v, args[1]) for v in value.values())
    raise AssertionError(f"annotation {ast.unparse(node)} not handled")


@pytest.fixture(scope="module")
def gpt2() -> tuple[ModelProfile, EvalConfig]:
    cfg = EvalConfig(model=ModelConfig(name="gpt2_medium", sequence_length=1024))
    return profile_model(cfg.model), cfg


PLAN = ExecutionPlan(micro_batch_size=1, precision="16.16", gradient_accumulation=64,
                     replication_factor=4, device_iterations=8, partials="half",
                     splits=("transformer.h.0", "transformer.h.8", "transformer.h.16"),
                     available_memory_proportion=0.25, offload_optimizer_state=True,
                     recompute="every_block")


def test_field_table_is_ipuconfig_init_signature() -> None:
    signature = ipu_config_signature()
    assert {k: ast.unparse(v) for k, v in signature.items()} == dict(IPU_CONFIG_FIELDS)


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_rendered_keys_and_value_types_match_ipuconfig_source(
    gpt2: tuple[ModelProfile, EvalConfig], mode: str
) -> None:
    signature = ipu_config_signature()
    data = json.loads(render_ipu_config(replace(PLAN, mode=mode), *gpt2))
    assert set(data) <= set(signature)
    bad = {k: v for k, v in data.items() if not fits(v, signature[k])}
    assert not bad
    prefix = "" if mode == "train" else "inference_"
    assert data[f"{prefix}layers_per_ipu"] == [0, 8, 8, 8]
    assert data[f"{prefix}matmul_proportion"] == [0.25] * 4
    assert data[f"{prefix}replication_factor"] == 4
    assert ("gradient_accumulation_steps" in data) == (mode == "train")
    # optimum reads `output_mode` to train only (it returns every output for inference): an
    # inference plan does not set it, so a carried training config keeps its own.
    assert data.get("output_mode") == ("final" if mode == "train" else None)


def test_layers_per_ipu_counts_layers_with_the_embeddings_on_ipu0(
    gpt2: tuple[ModelProfile, EvalConfig],
) -> None:
    plan = replace(PLAN, splits=("transformer.h.5", "transformer.h.13"))
    data = json.loads(render_ipu_config(plan, *gpt2))
    assert data["layers_per_ipu"] == [5, 8, 11] and data["ipus_per_replica"] == 3


def test_the_zoo_vit_s_encoder_layers_are_its_layers() -> None:
    """torchvision names ViT's layers `encoder_layer_N`: Graphcore's ViT file, 3 layers on each
    of 4 IPUs, was refused as placing "the 0 layers of vit_b_16"."""
    vit = profile_model(ModelConfig(name="vit_b_16", input_shape=[3, 224, 224],
                                    num_classes=1000))
    values = plan_values_from_ipu_config({"layers_per_ipu": [3, 3, 3, 3]}, vit, "train")
    assert values["splits"] == tuple(f"encoder.layers.encoder_layer_{i}" for i in (3, 6, 9))


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_reimporting_the_file_gives_back_the_plan(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path, mode: str
) -> None:
    # optimum-graphcore trains pipelined and infers sharded (ipu_configuration.py L615-619).
    plan = replace(PLAN, mode=mode, schedule="grouped" if mode == "train" else "sharded")
    path = tmp_path / "ipu_config.json"
    path.write_text(render_ipu_config(plan, *gpt2))
    values = plan_values_from_ipu_config(read_ipu_config(tmp_path), gpt2[0], mode)
    assert replace(plan, **values) == plan


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_every_plan_optimum_runs_comes_back_as_simulated(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path, mode: str
) -> None:
    """Whatever a plan's recomputation, schedule and stages: when optimum-graphcore runs it
    (`OPTIMUM.runs`), its ipu_config.json reads back to a plan the simulator times and places
    alike; otherwise the exports give optimum a stand-in."""
    from ipu_tune.exports._schedules import OPTIMUM
    from ipu_tune.hardware import make_system
    from ipu_tune.simulator import simulate

    ran = 0
    for recompute in ("auto", "none", "checkpoints", "every_block"):
        for schedule, splits in (("grouped", PLAN.splits), ("sharded", PLAN.splits),
                                 ("grouped", ())):
            stages = len(splits) + 1
            plan = replace(PLAN, mode=mode, recompute=recompute, schedule=schedule,
                           splits=splits, replication_factor=16 // stages,
                           available_memory_proportion_per_ipu=())
            if not OPTIMUM.runs(plan):
                assert (mode, schedule, recompute) in {
                    ("train", "sharded", r) for r in ("auto", "none", "checkpoints",
                                                     "every_block")} | {
                    ("infer", "grouped", r) for r in ("auto", "none", "checkpoints",
                                                     "every_block")} or (
                    mode == "train" and recompute in ("none", "checkpoints")), plan
                continue
            path = tmp_path / "ipu_config.json"
            path.write_text(render_ipu_config(plan, *gpt2))
            back = replace(plan, **plan_values_from_ipu_config(read_ipu_config(tmp_path),
                                                                gpt2[0], mode))
            system = make_system("mk2", 16)
            assert simulate(gpt2[0], system, back) == simulate(gpt2[0], system, plan), plan
            ran += 1
    assert ran >= 4


def test_wildcards_expand_as_optimum_does(gpt2: tuple[ModelProfile, EvalConfig]) -> None:
    values = plan_values_from_ipu_config({"layers_per_ipu": [0, -1, -1, -1],
                                          "ipus_per_replica": 4}, gpt2[0], "train")
    assert values["splits"] == ("transformer.h.0", "transformer.h.8", "transformer.h.16")
    even = plan_values_from_ipu_config({"layers_per_ipu": [-1], "ipus_per_replica": 5},
                                       gpt2[0], "train")
    # 24 layers on 5 IPUs: 4 each, the remainder on the last (modeling_utils, 0.7.1).
    assert even["splits"] == tuple(f"transformer.h.{i}" for i in (4, 8, 12, 16))


@pytest.mark.parametrize(("content", "message"), [
    # Keys and types as IPUConfig.__init__ declares them.
    ({"layers_per_ipu": [0, 8], "gradient_accumulation": 8},
     "gradient_accumulation: unknown key"),
    # An unknown key's value is not echoed (a file given by mistake may hold secrets).
    ({"layers_per_ipu": [0, 8], "aws_secret_access_key": "S3CRET"},
     "aws_secret_access_key: unknown key; IPUConfig's fields"),
    ({"layers_per_ipu": [0, 8.5]}, "layers_per_ipu=[0, 8.5]: must be List[int]"),
    ({"replication_factor": True}, "replication_factor=True: must be int"),
    ({"matmul_proportion": "0.2"}, "matmul_proportion='0.2': must be Union[float, List[float]]"),
    # Per-IPU values: one per IPU of a replica, each a proportion (not averaged away).
    ({"layers_per_ipu": [2, 2], "matmul_proportion": [0.1, 0.2, 0.9]},
     "matmul_proportion=[0.1, 0.2, 0.9]: must give one value per IPU, 2 "
     "(len(layers_per_ipu)=2)"),
    ({"layers_per_ipu": [2, 2], "matmul_proportion": [0.05, 1.5]},
     "matmul_proportion=[0.05, 1.5]: every element must be in 0..1"),
    ({"inference_matmul_proportion": [0.1, 0.2]},
     "inference_matmul_proportion=[0.1, 0.2]: must give one value per IPU, 1 "
     "(len(layers_per_ipu)=1)"),
    # optimum-graphcore's floors, named by the file's field.
    ({"ipus_per_replica": 0}, "ipus_per_replica=0: must be in 1..1024"),
    ({"ipus_per_replica": -2}, "ipus_per_replica=-2: must be in 1..1024"),
    ({"inference_device_iterations": 0}, "inference_device_iterations=0: must be in 1..1,048,576"),
    ({"layers_per_ipu": [-2, 4]}, "layers_per_ipu=[-2, 4]: every element must be >= -1"),
    # Counts beyond the config's own bounds: a trillion IPUs would be listed, not refused.
    ({"ipus_per_replica": 10**12}, "ipus_per_replica=1000000000000: must be in 1..1024"),
    ({"ipus_per_replica": 10**30}, "ipus_per_replica=1000000000000000000000000000000: must be "
                                   "in 1..1024"),
    ({"inference_device_iterations": 2**21}, "inference_device_iterations=2097152: must be in "
                                             "1..1,048,576"),
    # IPUConfig's own rules for the fields nothing simulates (they are carried to the export).
    ({"output_mode": "none"}, "output_mode='none': must be one of all, sum, final, default"),
    ({"layers_per_ipu": [2, 2], "embedding_serialization_factor": 2,
      "serialized_embedding_splits_per_ipu": [2, 0]},
     "serialized_embedding_splits_per_ipu=[2, 0]: only one of it and "
     "embedding_serialization_factor=2 may be set"),
    ({"layers_per_ipu": [2, 2, 2], "serialized_projection_splits_per_ipu": [1, 0, 1]},
     "serialized_projection_splits_per_ipu=[1, 0, 1]: splits >= 0, at least one, on "
     "consecutive IPUs"),
    ({"layers_per_ipu": [2, 2], "serialized_embedding_splits_per_ipu": [0, 0]},
     "serialized_embedding_splits_per_ipu=[0, 0]: splits >= 0, at least one"),
    ({"layers_per_ipu": [2, 2], "serialized_embedding_splits_per_ipu": [1, 1, 0]},
     "serialized_embedding_splits_per_ipu=[1, 1, 0]: must give one value per IPU, 2"),
])
def test_a_bad_ipu_config_is_one_line_naming_the_key_file_field_value_and_rule(
    tmp_path: Path, content: dict[str, Any], message: str
) -> None:
    """Keys, types and values are checked as optimum-graphcore checks them."""
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps(content))
    with pytest.raises(IpuTuneError) as err:
        read_ipu_config(path)
    # The key the path came from first, as every bad value (KEY=VALUE: FIELD=...).
    assert str(err.value).startswith(f"plan.from_ipu_config={str(path)!r}: {message}")
    assert "\n" not in str(err.value) and "S3CRET" not in str(err.value)


@pytest.mark.parametrize(("content", "mode", "message"), [
    ({"replication_factor": 8}, "train",
     "replication_factor (sets plan.replication_factor=8: must be at most system.num_ipus=4"),
    ({"inference_replication_factor": 1024}, "infer",
     "inference_replication_factor (sets plan.replication_factor=1024"),
    ({"layers_per_ipu": [0] + [3] * 8}, "train", "layers_per_ipu (sets plan.pipeline"),
    ({"matmul_proportion": 0}, "train",
     "matmul_proportion (sets plan.available_memory_proportion=0.0: must be in [0.001, 1]"),
])
def test_a_file_plan_the_system_cannot_hold_names_the_file_field(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path, content: dict[str, Any], mode: str,
    message: str,
) -> None:
    (tmp_path / "ipu_config.json").write_text(json.dumps(content))
    cfg = replace(gpt2[1], plan=PlanConfig(from_ipu_config=str(tmp_path)),
                  system=SystemConfig(num_ipus=4),
                  workload=replace(gpt2[1].workload, mode=mode))
    with pytest.raises(IpuTuneError) as err:
        apply_ipu_config(cfg)
    assert str(err.value).startswith(f"plan.from_ipu_config={str(tmp_path)!r}: {message}")


def test_layers_that_do_not_add_up_are_refused(gpt2: tuple[ModelProfile, EvalConfig]) -> None:
    with pytest.raises(IpuTuneError, match=r"layers_per_ipu=\[0, 8, 8\]: must place the 24"):
        plan_values_from_ipu_config({"layers_per_ipu": [0, 8, 8]}, gpt2[0], "train")


def test_run_with_optimum_is_a_dozen_lines_of_python_loading_the_folder(
    gpt2: tuple[ModelProfile, EvalConfig],
) -> None:
    for plan in (PLAN, replace(PLAN, mode="infer")):
        text = render_run_with_optimum(plan, *gpt2)
        compile(text, "run_with_optimum.py", "exec")
        code = [line for line in text.splitlines() if not line.startswith("#")]
        assert len(code) <= 20  # inference: six more lines compile the plan as optimum does
        assert ("IPUConfig.from_pretrained(os.path.dirname(os.path.abspath(__file__)))"
                in text)
        # Inference compiles the plan's batch as optimum's pipeline() would, without its
        # override of device iterations and replicas (tests/exports/test_optimum_inference.py).
        assert ("IPUTrainer(" in text) == plan.training
        assert ("poptorch.inferenceModel(" in text) != plan.training
        # A generating head's simulated rate is one forward pass, not token-by-token decoding.
        assert ("Generating runs a pass per new token" in text) == (not plan.training)
    assert "per_device_train_batch_size=1" in render_run_with_optimum(PLAN, *gpt2)


def test_run_with_optimum_trains_on_a_combined_batch_with_the_plans_loader(
    gpt2: tuple[ModelProfile, EvalConfig],
) -> None:
    """Each IPUTrainer step takes one combined batch (micro-batch x GA x replicas x device
    iterations) and drops a shorter one: the stand-in dataset holds one, and the loader runs as
    the plan's (IPUTrainingArguments fields read from optimum-graphcore's source)."""
    plan = replace(PLAN, gradient_accumulation=16, device_iterations=4, async_dataloader=True,
                   dataloader_workers=8)
    text = render_run_with_optimum(plan, *gpt2)
    combined = plan.micro_batch_size * 16 * plan.replication_factor * 4
    assert f"return {combined}  # one combined batch" in text
    assert 'dataloader_mode="async"' in text and "dataloader_num_workers=8" in text
    tree = optimum_source("optimum/graphcore/training_args.py")
    fields = {n.target.id for n in ast.walk(tree)
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    call = next(line for line in text.splitlines() if "IPUTrainingArguments(" in line)
    for name in re.findall(r"(\w+)=", call):
        assert name in fields, name


def optimum_pipeline_tasks() -> dict[str, set[str]]:
    """optimum-graphcore's pipeline tasks (`SUPPORTED_TASKS`) -> the auto classes each takes."""
    tree = optimum_source("optimum/graphcore/pipelines/__init__.py")
    table = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign)
                 and "SUPPORTED_TASKS" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign)
                                                      else n.target)
                 and isinstance(n.value, ast.Dict))  # fmt: skip
    out: dict[str, set[str]] = {}
    for key, spec in zip(table.keys, table.values, strict=True):
        assert isinstance(key, ast.Constant) and isinstance(spec, ast.Dict)
        classes = dict(zip((ast.literal_eval(k) for k in spec.keys if k is not None),
                           spec.values, strict=False))["class"]  # fmt: skip
        out[key.value] = {ast.unparse(c) for c in ast.walk(classes) if isinstance(c, ast.Name)}
    return out


def test_every_task_runs_as_an_optimum_pipeline_of_its_auto_class() -> None:
    supported = optimum_pipeline_tasks()
    for task, pipeline_task in _PIPELINE_TASKS.items():
        assert TASKS[task] in supported[pipeline_task], (task, pipeline_task)
    # A base model's features have no optimum pipeline (nor a registered pipelined class): a
    # tower gets no run_with_optimum.py; nor does a vision-language model (optimum-graphcore
    # pins transformers 4.29.2, older than its auto class).
    assert set(_PIPELINE_TASKS) == set(TASKS) - {"feature-extraction", "image-text-to-text"}
    assert not {"feature-extraction", "image-text-to-text"} & set(supported)


def test_run_with_optimum_of_a_squad_model_trains_on_answer_spans() -> None:
    cfg = EvalConfig(model=ModelConfig(name="bert_large_squad", sequence_length=384))
    profile = profile_model(cfg.model)
    plan = replace(PLAN, splits=("bert.encoder.layer.6", "bert.encoder.layer.12",
                                 "bert.encoder.layer.18"))  # fmt: skip
    text = render_run_with_optimum(plan, profile, cfg)
    compile(text, "run_with_optimum.py", "exec")
    assert "AutoConfig.from_pretrained('bert-large-uncased', hidden_size=1024" in text
    assert "AutoModelForQuestionAnswering.from_config(config)" in text
    assert "'start_positions': 0, 'end_positions': 0" in text
    infer = render_run_with_optimum(replace(plan, mode="infer"), profile, cfg)
    assert "outputs = ipu_model(input_ids=torch.randint(config.vocab_size, (BATCH, 384)))" in infer


@pytest.mark.parametrize("name", ["config.json", "my-bert.json"])
def test_run_with_optimum_builds_a_config_file_model_from_the_file_given(
        tmp_path: Path, name: str) -> None:
    """The path as given: Transformers reads a config file of any name (a folder's must be
    config.json), so the folder of `my-bert.json` would not load."""
    folder = tmp_path / "bert-large"
    folder.mkdir()
    (folder / name).write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2}))
    cfg = EvalConfig(model=ModelConfig(name="hf", sequence_length=128,
                                       hf=HfConfig(config_file=str(folder / name))))
    profile = profile_model(cfg.model)
    text = render_run_with_optimum(replace(PLAN, splits=("bert.encoder.layer.1",)), profile, cfg)
    assert f"AutoConfig.from_pretrained({str(folder / name)!r})" in text
    assert "AutoModelForMaskedLM.from_config(config)" in text
    loaded = transformers.AutoConfig.from_pretrained(str(folder / name))
    assert loaded.num_hidden_layers == 2


def test_run_with_optimum_gathers_the_masked_positions_it_was_profiled_with() -> None:
    """optimum-graphcore's BERT runs its MLM head on `config.max_num_masked_tokens` tokens
    (modeling_bert.py, PipelinedBertForMaskedLM.forward): the program sets what was profiled."""
    source = optimum_source("optimum/graphcore/models/bert/modeling_bert.py")
    assert "max_num_masked_tokens" in ast.unparse(source)
    hf = HfConfig(model_type="bert", config={"num_hidden_layers": 4})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=128,
                                       kwargs={"masked_positions": 20}))  # fmt: skip
    plan = replace(PLAN, splits=("bert.encoder.layer.1",))
    text = render_run_with_optimum(plan, profile_model(cfg.model), cfg)
    compile(text, "run_with_optimum.py", "exec")
    lines = text.splitlines()
    setting = lines.index("config.max_num_masked_tokens = 20  # model.kwargs.masked_positions")
    assert lines[setting - 1].startswith("config = ")
    assert "from_config(config)" in lines[setting + 1]
    plain = replace(cfg, model=replace(cfg.model, kwargs={}))
    assert "max_num_masked_tokens" not in render_run_with_optimum(plan, profile_model(plain.model),
                                                                  plain)


def test_an_imported_plan_runs_in_fp16_as_optimum_does_unless_you_set_the_precision(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path
) -> None:
    """IPUConfig has no precision: optimum-graphcore halves the model unless told otherwise
    (IPUTrainingArguments.fp32=False, pipeline(fp16=True)), so that is the plan it runs."""
    (tmp_path / "ipu_config.json").write_text(json.dumps({"layers_per_ipu": [0, 8, 8, 8]}))
    cfg = replace(gpt2[1], plan=PlanConfig(precision="32.32", from_ipu_config=str(tmp_path)),
                  system=SystemConfig(num_ipus=4))
    assert apply_ipu_config(cfg).plan.precision == "16.16"
    pinned = frozenset({"plan.precision"})  # given on the command line: kept
    assert apply_ipu_config(cfg, pinned).plan.precision == "32.32"


def test_auto_masked_positions_are_written_as_the_count_profiled() -> None:
    hf = HfConfig(model_type="bert", config={"num_hidden_layers": 2})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=384,
                                       kwargs={"masked_positions": "auto"}))  # fmt: skip
    plan = replace(PLAN, splits=("bert.encoder.layer.1",))
    text = render_run_with_optimum(plan, profile_model(cfg.model), cfg)
    assert "config.max_num_masked_tokens = 56  # model.kwargs.masked_positions" in text


def test_a_file_plan_evaluated_whole_names_the_file_field(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path,
) -> None:
    """`evaluate` checks the plan as a whole: PopTorch's pipelined minimum is the file's
    `gradient_accumulation_steps` (its default 1 here), not a key the user never wrote, and
    counts GPT-2's tied head, a stage of its own, at once (it said >= 4, then >= 5)."""
    (tmp_path / "ipu_config.json").write_text(json.dumps({"layers_per_ipu": [0, 8, 8, 8]}))
    cfg = replace(gpt2[1], plan=PlanConfig(from_ipu_config=str(tmp_path)),
                  system=SystemConfig(num_ipus=4))
    with pytest.raises(IpuTuneError) as err:
        apply_ipu_config(cfg, whole=True)
    assert str(err.value).startswith(f"plan.from_ipu_config={str(tmp_path)!r}: "
                                     "gradient_accumulation_steps (unset: IPUConfig's "
                                     "default; sets plan.gradient_accumulation=1: must be >= 5, "
                                     "the pipeline stages: 4 and the tied head `lm_head`")
    assert apply_ipu_config(cfg).plan.gradient_accumulation == 1  # a start: the search raises it


def test_a_tied_heads_pipeline_rule_names_the_file_field_and_a_tuning_start_passes(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path,
) -> None:
    """GPT-2's tied head runs as a stage of its own on IPU0 after the last: PopTorch needs one
    more accumulation step. `evaluate` names the file's field; a tuning run starts from the
    plan all the same (the search raises it), as from a plan of its splits alone."""
    from ipu_tune.config import TuneConfig
    from ipu_tune.tuner import prepare

    (tmp_path / "ipu_config.json").write_text(json.dumps(
        {"layers_per_ipu": [0, 8, 8, 8], "gradient_accumulation_steps": 4}))
    cfg = replace(gpt2[1], plan=PlanConfig(from_ipu_config=str(tmp_path)),
                  system=SystemConfig(num_ipus=4))
    with pytest.raises(IpuTuneError) as err:
        apply_ipu_config(cfg, whole=True)
    assert str(err.value).startswith(
        f"plan.from_ipu_config={str(tmp_path)!r}: gradient_accumulation_steps (sets "
        "plan.gradient_accumulation=4: must be >= 5, the pipeline stages: 4 and the tied head")
    tune = TuneConfig(model=cfg.model, plan=cfg.plan, system=cfg.system,
                      results_dir=str(tmp_path / "results"))
    assert prepare(tune).case.plan.gradient_accumulation == 4


def test_a_file_plan_of_other_ipus_than_the_system_names_its_fields(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path,
) -> None:
    """`evaluate` of a file's 4 stages x 4 replicas on 2 IPUs named only `system.num_ipus`."""
    (tmp_path / "ipu_config.json").write_text(json.dumps(
        {"layers_per_ipu": [0, 8, 8, 8], "replication_factor": 4,
         "gradient_accumulation_steps": 64}))
    cfg = replace(gpt2[1], plan=PlanConfig(from_ipu_config=str(tmp_path)),
                  system=SystemConfig(num_ipus=2))
    with pytest.raises(IpuTuneError) as err:
        apply_ipu_config(cfg, whole=True)
    assert str(err.value) == (
        f"plan.from_ipu_config={str(tmp_path)!r}: len(layers_per_ipu) and replication_factor "
        "(system.num_ipus=2: must equal pipeline stages (4) x plan.replication_factor (4) = 16)")


def test_proportions_that_differ_per_ipu_are_kept_per_ipu(
    gpt2: tuple[ModelProfile, EvalConfig], tmp_path: Path
) -> None:
    """Graphcore's configs may give IPU0 (the embedding's) its own proportion: the plan keeps
    each IPU's, and writes them back; equal values are the one proportion."""
    def imported(amp: list[float], pinned: frozenset[str] = frozenset()) -> EvalConfig:
        (tmp_path / "ipu_config.json").write_text(json.dumps(
            {"layers_per_ipu": [0, 8, 8, 8], "matmul_proportion": amp}))
        cfg = replace(gpt2[1], plan=PlanConfig(from_ipu_config=str(tmp_path)),
                      system=SystemConfig(num_ipus=4))
        return apply_ipu_config(cfg, pinned)

    cfg = imported([0.15, 0.25, 0.25, 0.25])
    assert cfg.plan.available_memory_proportion_per_ipu == [0.15, 0.25, 0.25, 0.25]
    assert cfg.plan.available_memory_proportion == 0.225  # what a search draws around
    data = json.loads(render_ipu_config(plan_from_config(cfg), gpt2[0], cfg))
    assert data["matmul_proportion"] == [0.15, 0.25, 0.25, 0.25]
    equal = imported([0.25] * 4).plan
    assert equal.available_memory_proportion_per_ipu == []
    assert equal.available_memory_proportion == 0.25
    # The one proportion given on the command line runs on every IPU.
    pinned = imported([0.15, 0.25, 0.25, 0.25], frozenset({"plan.available_memory_proportion"}))
    assert pinned.plan.available_memory_proportion_per_ipu == []
    assert pinned.plan.available_memory_proportion == gpt2[1].plan.available_memory_proportion


def test_a_config_key_that_is_no_python_name_never_becomes_code() -> None:
    """Defence in depth: the model section refuses unknown config keys, and the program's
    call arguments would still write such a key as a string."""
    from ipu_tune.exports._ipu_config import _call_args

    args = _call_args({"a=__import__('os').system('x'),b": 1, "n_layer": 2})
    assert args.startswith("**{") and ast.literal_eval(args[2:])["n_layer"] == 2


@pytest.mark.parametrize(("model_type", "splits", "layers"), [
    # optimum counts a ConvNeXt's `stage.layers` only (18 in convnext-tiny); a stage's own
    # block (its downsampling) is none, and the first stage's first layer runs in block 0.
    ("convnext", ("convnext.encoder.stages.1.layers.0", "convnext.encoder.stages.2.layers.0",
                  "convnext.encoder.stages.2.layers.6"), [3, 3, 6, 6]),
    # wav2vec2's CTC model: 7 conv layers and the positional conv on IPU0, lm_head last (21).
    ("wav2vec2", ("wav2vec2.encoder.layers.3", "wav2vec2.encoder.layers.6",
                  "wav2vec2.encoder.layers.9"), [11, 3, 3, 4]),
])
def test_the_layers_optimum_counts_export_and_import_alike(
    tmp_path: Path, model_type: str, splits: tuple[str, ...], layers: list[int],
) -> None:
    """Export and import count the entries optimum-graphcore's `parallelize()` counts: the
    file sums to them, and reads back to the same splits."""
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=HfConfig(model_type=model_type)),
                     system=SystemConfig(num_ipus=4))
    profile = profile_model(cfg.model)
    plan = replace(PLAN, splits=splits, replication_factor=1)
    (tmp_path / "ipu_config.json").write_text(render_ipu_config(plan, profile, cfg))
    data = read_ipu_config(tmp_path)
    assert data["layers_per_ipu"] == layers
    assert plan_values_from_ipu_config(data, profile, "train")["splits"] == splits
    # Wildcards that cut wav2vec2's front end (21 entries: 5, 5, 5, 6) name the block.
    if model_type == "wav2vec2":
        with pytest.raises(IpuTuneError, match="inside a block of"):
            plan_values_from_ipu_config({"layers_per_ipu": [-1] * 4, "ipus_per_replica": 4},
                                        profile, "train")


@pytest.mark.parametrize(("model_type", "task", "files"), [
    ("bert", "masked-lm", True), ("gpt2", "sequence-classification", True),
    ("roberta", "token-classification", True), ("deberta-v2", "token-classification", False),
    ("convnext", "image-classification", True), ("whisper", "speech-seq2seq", True),
    ("llama", "causal-lm", False), ("swin", "image-classification", False),
    ("deberta-v2", "masked-lm", False), ("gpt2", "question-answering", False),
])
def test_optimum_files_only_for_the_classes_optimum_pipelines(
        model_type: str, task: str, files: bool) -> None:
    """optimum-graphcore 0.7.1's `to_pipelined` runs only the classes it registers: another
    model gets no ipu_config.json nor run_with_optimum.py (they could not run)."""
    from ipu_tune.exports._optimum import optimum_runs

    assert optimum_runs(ModelConfig(name="hf", hf=HfConfig(model_type=model_type,
                                                          task=task))) is files


# The auto-class mapping of each task's Transformers classes (transformers.models.auto).
_TASK_MAPPINGS = {
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "token-classification": "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "question-answering": "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "audio-classification": "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "speech-seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
}
# Registered classes of no ipu-tune task: base models (feature extraction runs no optimum
# pipeline), multiple choice and pre-training heads, and models of no Transformers model type.
_NO_TASK = re.compile(r"((?<!LMHead)Model|ForMultipleChoice|ForPreTraining)$|^(GroupBert|Lxmert)")


def test_the_pipelined_classes_are_the_ones_optimum_registers() -> None:
    """`OPTIMUM_PIPELINED`, as classes, is the wheel's `@register(...)` list less the classes
    of no ipu-tune task: a head it pipelines is never left without its files, nor one it
    refuses given them."""
    from transformers.models.auto import modeling_auto

    from ipu_tune.exports._optimum import OPTIMUM_PIPELINED

    optimum_source(SOURCE)  # skips without the wheel
    (wheel,) = sorted(WHEEL_DIR.glob("optimum_graphcore-0.7.1-*.whl"))[:1]
    registered = set()
    with zipfile.ZipFile(wheel) as whl:
        for name in whl.namelist():
            if re.fullmatch(r"optimum/graphcore/models/\w+/modeling_\w+\.py", name):
                registered |= {m.rsplit(".", 1)[-1] for m in re.findall(
                    r"^@register\(([\w.]+)\)", whl.read(name).decode(), re.MULTILINE)}
    ours = {getattr(modeling_auto, _TASK_MAPPINGS[task])[model_type]
            for model_type, tasks in OPTIMUM_PIPELINED.items() for task in tasks}
    assert ours == {c for c in registered if not _NO_TASK.search(c)}
