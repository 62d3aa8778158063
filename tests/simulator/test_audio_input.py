"""An audio input on the host side: floats in the stream's type, converted on the host, never
8-bit (which is for pixels); the token ids paired with an input (a decoder's, a caption's)."""

from __future__ import annotations

from dataclasses import replace

from ipu_tune.config import HfConfig, ModelConfig
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator._constants import SimConstants
from ipu_tune.simulator._host import host_seconds_per_sample, input_bytes_per_sample

PLAN = ExecutionPlan(micro_batch_size=1, optimizer="adamw", precision="16.16",
                     gradient_accumulation=8, device_iterations=4)


def test_audio_streams_2_or_4_bytes_per_element_and_its_decoder_ids() -> None:
    wav = profile_model(ModelConfig(name="hf", hf=HfConfig(model_type="wav2vec2"),
                                    sequence_length=16_000))
    assert input_bytes_per_sample(wav, PLAN) == 2.0 * 16_000
    # 8-bit I/O applies to pixels: an audio stream is the same with it (were it set).
    assert input_bytes_per_sample(wav, replace(PLAN, eight_bit_io=True)) == 2.0 * 16_000
    assert input_bytes_per_sample(wav, replace(PLAN, precision="32.32")) == 4.0 * 16_000
    whisper = profile_model(ModelConfig(name="hf", hf=HfConfig(model_type="whisper"),
                                        sequence_length=32))
    assert input_bytes_per_sample(whisper, PLAN) == 2.0 * 80 * 3000 + 4.0 * 32


def test_the_host_converts_every_audio_element_with_or_without_8_bit_io() -> None:
    wav = profile_model(ModelConfig(name="hf", hf=HfConfig(model_type="wav2vec2"),
                                    sequence_length=16_000))
    c, system = SimConstants(), make_system("mk2", 2)
    pre = c.preprocess_s_per_sample if system.host.preprocess_s_per_sample is None \
        else system.host.preprocess_s_per_sample
    per_element = c.convert_s_per_element if system.host.convert_s_per_element is None \
        else system.host.convert_s_per_element
    for plan in (PLAN, replace(PLAN, eight_bit_io=True)):
        seconds = host_seconds_per_sample(wav, system, plan, c)
        assert seconds == pre + per_element * 16_000


def test_an_image_text_model_streams_its_captions_ids_beside_its_pixels() -> None:
    """CLIP's base model: 3 x 224 x 224 pixels (1 or 2 bytes each) and 77 int32 token ids."""
    one_layer = {"num_hidden_layers": 1}
    clip = profile_model(ModelConfig(name="hf", hf=HfConfig(
        model_type="clip", task="feature-extraction",
        config={"text_config": one_layer, "vision_config": one_layer})))
    pixels = 3 * 224 * 224
    assert clip.paired_tokens == 77
    assert input_bytes_per_sample(clip, replace(PLAN, eight_bit_io=True)) == pixels + 4.0 * 77
    assert input_bytes_per_sample(clip, PLAN) == 2.0 * pixels + 4.0 * 77
