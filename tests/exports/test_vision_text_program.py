"""The PopTorch program of a vision-language model (LLaVA): pixels and token ids in as the
data loader yields them, next-token logits out, the loss on the text only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ipu_tune.config import EvalConfig, HfConfig, ModelConfig, PipelineConfig, PlanConfig
from ipu_tune.models import profile_model

from ._recorder import poptorch_model
from ._render import poptorch_snippet

TEXT = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100}
VISION = {"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64,
          "num_attention_heads": 2, "image_size": 32, "patch_size": 16}
IMAGE_TOKEN = 99  # the config's; 2 x 2 patches of 16 x 16 take 4 places


@pytest.mark.parametrize("eight_bit", [False, True])
def test_a_vision_language_program_trains_the_next_tokens_after_the_image(
    monkeypatch: pytest.MonkeyPatch, eight_bit: bool,
) -> None:
    hf = HfConfig(model_type="llava", config={"text_config": TEXT, "vision_config": VISION,
                                               "image_token_id": IMAGE_TOKEN})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=12),
                     plan=PlanConfig(precision="32.32", gradient_accumulation=8,
                                     eight_bit_io=eight_bit, pipeline=PipelineConfig(
                                         splits=["model.language_model.layers.0"])))
    profile = profile_model(cfg.model)
    assert profile.paired_tokens == 12 and profile.input_kind == "image"
    source = poptorch_snippet(cfg, None, profile)
    flat = " ".join(source.replace("\n#", " ").split())  # comment lines wrap
    assert "AutoModelForImageTextToText" in flat
    assert "each with its 12 token ids (torch.int32), the image token at the places" in flat
    model = poptorch_model(monkeypatch, source)
    pixels = (torch.randint(256, (2, 3, 32, 32), dtype=torch.uint8) if eight_bit
              else torch.randn(2, 3, 32, 32))
    ids = torch.randint(90, (2, 12), dtype=torch.int32)
    ids[:, :4] = IMAGE_TOKEN
    out, loss = model(pixels, ids)
    assert out.shape == (2, 12, 100)
    # Token t + 1 from the image and the tokens up to t; the image's places are no targets.
    targets = ids[:, 1:].long().masked_fill(ids[:, 1:] == IMAGE_TOKEN, -100)
    expected = F.cross_entropy(out[:, :-1].reshape(-1, 100), targets.reshape(-1))
    assert torch.isfinite(loss) and torch.allclose(loss, expected)
    assert int((targets != -100).sum()) == 2 * 8  # 11 next tokens, 3 of them image places
    loss.backward()


def test_a_vision_language_plan_gets_no_optimum_graphcore_files() -> None:
    # optimum-graphcore 0.7.1 pins transformers 4.29.2, older than the image-text-to-text
    # class: its files would not run.
    from ipu_tune.exports import EXPORTERS, export_context

    hf = HfConfig(model_type="llava", config={"text_config": TEXT, "vision_config": VISION,
                                               "image_token_id": IMAGE_TOKEN})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=12))
    ctx = export_context(cfg, None, profile_model(cfg.model))
    written = {e.file_name for e in EXPORTERS if e.applies(ctx)}
    assert "poptorch_options.py" in written
    assert not written & {"ipu_config.json", "run_with_optimum.py"}


def test_best_yaml_of_a_transformers_model_states_no_input_shape_its_config_sizes() -> None:
    # The pixels a Transformers model reads are its config's (here 32 x 32); the schema's
    # default input_shape was never simulated, so best.yaml does not state it.
    import yaml

    from ipu_tune.exports import EXPORTERS, export_context

    hf = HfConfig(model_type="llava", config={"text_config": TEXT, "vision_config": VISION,
                                               "image_token_id": IMAGE_TOKEN})
    cfg = EvalConfig(model=ModelConfig(name="hf", hf=hf, sequence_length=12))
    ctx = export_context(cfg, None, profile_model(cfg.model))
    best = next(e for e in EXPORTERS if e.file_name == "best.yaml")
    model = yaml.safe_load(best.render(ctx))["model"]
    assert "input_shape" not in model and model["hf"]["model_type"] == "llava"
