"""The zoo matches the reference architectures (torchvision / Hugging Face counts)."""

from __future__ import annotations

import pytest
import torch

import ipu_tune
from ipu_tune.config import ModelConfig
from ipu_tune.config._load import typed
from ipu_tune.models import ZOO, build_model

from .conftest import CONF_MODEL, conf

IMAGENET = {"input_shape": [3, 224, 224], "num_classes": 1000}

# torchvision.models.<name>(weights=None) parameter counts (torchvision 0.19 model docs).
TORCHVISION_PARAMS = {
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "resnext50_32x4d": 25_028_904,
    "resnext101_32x8d": 88_791_336,
    "vit_b_16": 86_567_656,
}


@pytest.mark.parametrize("name", sorted(TORCHVISION_PARAMS))
def test_parameter_counts_equal_torchvision(name: str, profile_of) -> None:
    # The conf files hold ImageNet settings for these (resnet101's is the seed's 10 classes).
    fields = conf(name) if name != "resnet101" else {"name": name, **IMAGENET}
    assert fields["num_classes"] == 1000 and fields["input_shape"] == [3, 224, 224]
    prof = profile_of(**fields)
    assert prof.parameters == TORCHVISION_PARAMS[name]
    # The profile attributes every parameter exactly once (tied or not) to some op.
    assert sum(op.parameters for op in prof.ops) == prof.parameters


def test_resnet101_forward_flops_match_7_8_gmac(profile_of) -> None:
    prof = profile_of(name="resnet101", **IMAGENET)
    # 7.80 GMAC per 224x224 image (torchvision docs: 7.80 GFLOPS counted as MACs); 2 per MAC.
    assert prof.forward_flops == pytest.approx(15.60e9, rel=0.005)


def test_resnet101_blocks_are_torch_module_names_in_order(profile_of) -> None:
    prof = profile_of(name="resnet101", **IMAGENET)
    blocks = prof.blocks
    expected = ["conv1"]
    for stage, count in enumerate([3, 4, 23, 3], start=1):
        expected += [f"layer{stage}.{i}" for i in range(count)]
    assert blocks == [*expected, "fc"]
    assert "layer3.8" in blocks
    # layer3.8 is the 9th bottleneck of layer3, as model.layer3[8] in the seed tutorial.
    assert blocks.index("layer3.8") == 1 + 3 + 4 + 8


def test_resnet_module_names_and_shapes_follow_torchvision() -> None:
    with torch.device("meta"):
        model, _ = build_model(typed(ModelConfig, {"name": "resnet50", **IMAGENET}))
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    assert shapes["conv1.weight"] == (64, 3, 7, 7)
    # torchvision's v1.5 bottleneck: the stride sits on the 3x3 conv2.
    assert model.get_submodule("layer2.0.conv2").stride == (2, 2)
    assert model.get_submodule("layer2.0.conv1").stride == (1, 1)
    assert shapes["layer1.0.downsample.0.weight"] == (256, 64, 1, 1)
    assert shapes["layer4.2.bn3.weight"] == (2048,)
    assert shapes["fc.weight"] == (1000, 2048)


def test_resnext_uses_grouped_3x3(profile_of) -> None:
    prof = profile_of(**conf("resnext101_32x8d"))
    conv2 = next(op for op in prof.ops if op.name == "layer1.0.conv2")
    # 32 groups of 8 channels: width 256, K = 256/32 * 3 * 3 per output channel.
    assert (conv2.k, conv2.n) == (8 * 9, 256)


def test_bert_large_has_335m_parameters_with_tied_decoder(profile_of) -> None:
    prof = profile_of(**conf("bert_large"))
    assert prof.parameters == pytest.approx(335e6, rel=0.01)
    assert prof.input_kind == "tokens"
    assert prof.input_shape == (128,)
    assert prof.num_classes == 30522
    assert prof.blocks == ["embeddings", *(f"encoder.layer.{i}" for i in range(24)), "cls"]
    decoder = next(op for op in prof.ops if op.name == "cls.predictions.decoder")
    # Tied to the word embeddings: only the bias is new there.
    assert decoder.parameters == 30522
    assert (decoder.k, decoder.n) == (1024, 30522)


def test_bert_sequence_length_sets_the_token_count(profile_of) -> None:
    short = profile_of(name="bert_base", sequence_length=64)
    long = profile_of(name="bert_base", sequence_length=128)
    assert short.input_shape == (64,)
    assert short.block_stats[0].output_elements == 64 * 768
    assert long.block_stats[0].output_elements == 128 * 768
    # Dense layers scale with tokens, attention scores with tokens squared: more than 2x.
    assert long.forward_flops > 2 * short.forward_flops
    assert short.sample_bytes == 4 * 64 * 3


def test_bert_masked_positions_shrink_the_head(profile_of) -> None:
    full = profile_of(name="bert_base", sequence_length=128)
    masked = profile_of(name="bert_base", sequence_length=128, kwargs={"masked_positions": 20})
    head = full.block_index("cls")
    assert masked.block_stats[head].forward_flops == pytest.approx(
        full.block_stats[head].forward_flops * 20 / 128
    )
    assert masked.parameters == full.parameters


def test_vit_blocks(profile_of) -> None:
    prof = profile_of(**conf("vit_b_16"))
    assert prof.blocks[0] == "conv_proj"
    assert prof.blocks[1] == "encoder.layers.encoder_layer_0"
    assert prof.blocks[-1] == "heads"
    assert len(prof.blocks) == 14
    # 196 patches + class token, 768 wide, cross every encoder boundary.
    assert prof.block_stats[1].output_elements == 197 * 768


def test_mnist_cnn_blocks_match_the_pipelining_tutorial(profile_of) -> None:
    prof = profile_of(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=10)
    assert prof.blocks == ["layer1", "layer2", "layer3", "layer4"]
    # conv1->10 k5 pool2: 10x12x12; conv10->20 k5 pool2: 20x4x4 = 320; linear 256; linear 10.
    assert [b.output_elements for b in prof.block_stats] == [1440, 320, 256, 10]
    assert prof.parameters == (1 * 10 * 25 + 10) + (10 * 20 * 25 + 20) + (320 * 256 + 256) + (
        256 * 10 + 10
    )
    # The tutorial puts the loss in B4 with the last layer.
    assert prof.ops[-1].kind == "loss" and prof.ops[-1].block == 3


def test_every_zoo_model_has_a_conf_file_that_profiles(profile_of) -> None:
    files = {p.stem for p in CONF_MODEL.glob("*.yaml")}
    assert set(ZOO) <= files
    for name in ZOO:
        data = conf(name)
        assert data["name"] == name
        cfg = typed(ModelConfig, data)  # keys are those of ModelConfig
        prof = profile_of(**data)
        assert prof.parameters > 0 and prof.forward_flops > 0
        assert prof.sample_bytes == (cfg.dataset.sample_bytes or prof.sample_bytes)


def test_resnet101_conf_is_the_seed_tutorial_setting() -> None:
    data = conf("resnet101")
    assert data["input_shape"] == [3, 64, 64]
    assert data["num_classes"] == 10
    assert data["dataset"]["name"] == "cifar10"
    assert data["dataset"]["sample_bytes"] == 32 * 32 * 3


def test_resnet50_conf_is_imagenet_with_jpeg_host_cost() -> None:
    data = conf("resnet50")
    assert data["input_shape"] == [3, 224, 224] and data["num_classes"] == 1000
    assert 50_000 < data["dataset"]["sample_bytes"] < 200_000
    assert 0.001 <= data["dataset"]["preprocess_s_per_sample"] <= 0.01


def test_public_profile_api_matches_design(profile_of) -> None:
    p = ipu_tune.profile({"name": "resnet101", "input_shape": [3, 224, 224], "num_classes": 1000})
    assert isinstance(p.parameters, int) and p.parameters == 44_549_160
    assert isinstance(p.forward_flops, float)
    assert isinstance(p.blocks, list) and all(isinstance(b, str) for b in p.blocks)
    d = p.to_dict()
    assert d["parameters"] == p.parameters and d["blocks"] == p.blocks
