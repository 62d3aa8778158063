"""`plan.embedding_serialization` in every export: the vocabulary matmul in slices of its
output channels, as the simulation ran it.

PopTorch's program replaces the head with one whose matmul is `poptorch.serializedMatMul`
(run here on the CPU with the call recorded: it computes the head's own output, its weight
still the embeddings'); PopART's names the matmul for `setSerializeMatMul`; TensorFlow's says
what to do by hand; optimum-graphcore's config sets `embedding_serialization_factor`.
"""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig, PlanConfig, SystemConfig
from ipu_tune.exports import apply_ipu_config
from ipu_tune.exports._ipu_config import render_ipu_config
from ipu_tune.models import profile_model
from ipu_tune.plan import plan_from_config

from ._recorder import Log, install, run_source
from ._render import render

# A small GPT-2 of an odd vocabulary: 1001 does not divide into 4 slices.
GPT2 = ModelConfig(name="hf", sequence_length=16, hf=HfConfig(model_type="gpt2", config={
    "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 1001}))


def _cfg(factor: int, model: ModelConfig = GPT2, mode: str = "train") -> EvalConfig:
    cfg = EvalConfig(model=model, plan=PlanConfig(embedding_serialization=factor),
                     system=SystemConfig(num_ipus=1))
    cfg.workload.mode = mode
    return cfg


def _slices(lhs: torch.Tensor, rhs: torch.Tensor, mode: Any, factor: int) -> torch.Tensor:
    """serializedMatMul's result: the product, slice by slice of the output channels."""
    assert rhs.shape[1] % factor == 0  # PopTorch splits the channels evenly
    return torch.cat([lhs @ part for part in rhs.chunk(factor, dim=1)], dim=-1)


def test_poptorchs_head_runs_in_slices_computing_the_heads_own_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = render("poptorch", _cfg(4), None, profile_model(GPT2))
    assert 'SERIALIZED = ["lm_head"]' in source and "SERIALIZATION_FACTOR = 4" in source
    log = Log()
    install(monkeypatch, log, "poptorch")
    log.returns["poptorch.serializedMatMul"] = _slices
    log.returns["poptorch.BeginBlock"] = lambda module, **_: module
    model = run_source(source, "poptorch_options.py")["model"].model  # inside its loss
    head = model.lm_head
    assert type(head).__name__ == "SerializedLinear"
    assert head.linear.weight is model.transformer.wte.weight  # still tied
    x = torch.randn(3, 64)
    with torch.no_grad():
        out = head(x)
    assert out.shape == (3, 1001)
    assert torch.allclose(out, x @ model.transformer.wte.weight.t(), atol=1e-5)
    (args, _), = log.calls("poptorch.serializedMatMul")
    assert args[1].shape == (64, 1004) and args[3] == 4  # padded to a multiple of the slices
    assert repr(args[2]) == "poptorch.MatMulSerializationMode.OutputChannels"


def test_popart_names_the_matmul_and_tensorflow_says_to_build_it() -> None:
    profile = profile_model(GPT2)
    popart = ast.parse(render("popart", _cfg(8), None, profile))
    named = [ast.literal_eval(n.value) for n in popart.body if isinstance(n, ast.Assign)
             and getattr(n.targets[0], "id", "") == "SERIALIZE_MATMUL"]  # fmt: skip
    assert named == [{"lm_head": 8}]
    tf = " ".join(render("tensorflow", _cfg(8), None, profile).replace("\n# ", " ").split())
    assert "Embedding serialization 8: the vocabulary matmul lm_head" in tf
    assert "split the layer's kernel into 8 column slices" in tf


def test_no_serialization_lines_at_one_slice_or_without_a_vocabulary() -> None:
    vit = ModelConfig(name="hf", hf=HfConfig(model_type="vit", config={
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
        "intermediate_size": 128}))
    for cfg in (_cfg(1), _cfg(4, vit)):
        profile = profile_model(cfg.model)
        text = "".join(render(n, cfg, None, profile) for n in ("poptorch", "popart", "tensorflow"))
        assert "serializ" not in text.lower().replace("serialization_factor\": 1", "")


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_optimum_reads_the_factor_the_plan_ran(mode: str) -> None:
    """The models read the training field in either mode (modeling_gpt2.py): it is the plan's
    in both; the inference field, which only mt5 reads, is left as a file gave it."""
    cfg = _cfg(4, mode=mode)
    out = json.loads(render_ipu_config(plan_from_config(cfg), profile_model(GPT2), cfg))
    assert out["embedding_serialization_factor"] == 4
    assert "inference_embedding_serialization_factor" not in out


def test_a_file_is_read_for_the_field_the_models_read_and_the_rest_carried(
        tmp_path: Path) -> None:
    """An inference plan of a file giving 2 to train and 8 to infer runs 2, as optimum's GPT-2
    does in either mode; its inference field comes back as the file gave it."""
    (tmp_path / "ipu_config.json").write_text(json.dumps({
        "layers_per_ipu": [-1], "ipus_per_replica": 1, "embedding_serialization_factor": 2,
        "inference_embedding_serialization_factor": 8}))
    cfg = apply_ipu_config(replace(_cfg(1, mode="infer"), plan=PlanConfig(
        from_ipu_config=str(tmp_path))))
    assert cfg.plan.embedding_serialization == 2
    out = json.loads(render_ipu_config(plan_from_config(cfg), profile_model(GPT2), cfg))
    assert out["embedding_serialization_factor"] == 2
    assert out["inference_embedding_serialization_factor"] == 8


def test_a_model_without_a_vocabulary_head_carries_the_field_as_the_file_gave_it(
        tmp_path: Path) -> None:
    """Moot there (nothing to slice): neither read into the plan nor set by it."""
    vit = ModelConfig(name="hf", hf=HfConfig(model_type="vit", config={
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
        "intermediate_size": 128}))
    plain = _cfg(4, vit)
    out = json.loads(render_ipu_config(plan_from_config(plain), profile_model(vit), plain))
    assert "embedding_serialization_factor" not in out
    (tmp_path / "ipu_config.json").write_text(json.dumps({
        "layers_per_ipu": [-1], "ipus_per_replica": 1, "embedding_serialization_factor": 4}))
    cfg = apply_ipu_config(replace(plain, plan=PlanConfig(from_ipu_config=str(tmp_path))))
    assert cfg.plan.embedding_serialization == 1
    assert cfg.plan.ipu_config_carried == {"embedding_serialization_factor": 4}
    out = json.loads(render_ipu_config(plan_from_config(cfg), profile_model(vit), cfg))
    assert out["embedding_serialization_factor"] == 4
