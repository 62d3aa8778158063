"""`ipu-tune profile` (ipu_tune.cli.profile_cmd.main)."""

from __future__ import annotations

import json

import pytest

from ipu_tune.cli.profile_cmd import main


def test_table_for_the_seed_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resnet101"]) == 0
    out = capsys.readouterr().out
    # conf/model/resnet101.yaml's 10 classes: the logits' last dimension
    assert "resnet101: input [3, 64, 64] (image), 10 output features (the output's last " \
           "dimension: classes, a vocabulary or a width)" in out
    lines = out.splitlines()
    names = [line.split()[0] for line in lines[3:-3]]
    assert names[:2] == ["conv1", "layer1.0"] and names[-1] == "fc" and "layer3.8" in names
    total = next(line for line in lines if line.startswith("total"))
    assert "42,520,650" in total  # 44,549,160 - (2048 x 990 + 990) for 10 classes


def test_json_with_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["resnet101", "--input-shape", "3", "224", "224", "--num-classes", "1000", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parameters"] == 44_549_160
    assert data["forward_flops"] == pytest.approx(15.60e9, rel=0.005)
    assert "layer3.8" in data["blocks"]
    assert "ops" not in data


def test_sequence_length_and_ops(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bert_base", "--sequence-length", "16", "--json", "--ops"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["input_shape"] == [16]
    assert any(op["name"] == "encoder.layer.0.attention.self.query" for op in data["ops"])


def test_target_and_kwarg(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["--target", "tests.models.factories.tiny_mlp", "--input-shape", "8", "--kwarg",
         "width=5", "--ops"]
    )  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "tests.models.factories.tiny_mlp" in out and "[matmul]" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["resnet9000"], "zoo models: resnet18"),
        ([], "give a zoo name"),
        (["--target", "no_such_mod_abc.f"], "cannot import"),
        (["resnet18", "--kwarg", "nonsense"], "expected KEY=VALUE"),
        (["resnet18", "plan.precision=16.16"], "overrides of the model section only"),
        (["resnet18", "~model.num_classes"], "deletion is not allowed"),
        (["resnet18", "model.num_classes=1,2"], "several values are a sweep"),
        (["resnet18", "model.nope=1"], "model.nope: unknown key"),
        (["resnet18", "model.num_classes=-3"], "model.num_classes=-3: must be >= 1"),
        (["resnet18", "bert_base"], "'resnet18' and 'bert_base'; allowed: one zoo name"),
        # A builder's failure names what the user gave: the input shape, or the keyword.
        (["vit_b_16", "--input-shape", "3", "100", "100"], "model.input_shape=[3, 100, 100]: "
         "height and width multiples of the patch size, 16, for vit_b_16 (e.g. [3, 96, 96])"),
        (["mnist_cnn", "--input-shape", "1", "2", "2"], "model.input_shape=[1, 2, 2]: mnist_cnn "
         "cannot be built for it with model.num_classes=10 (ValueError: "),
        (["mnist_cnn", "--kwarg", "width=3"], "model.kwargs.width=3: set by mnist_cnn from "
         "model.input_shape and model.num_classes; give those instead"),
        (["vit_b_16", "--kwarg", "patch_size=0"], "model.kwargs={'patch_size': 0}: vit_b_16: "
         "ZeroDivisionError"),
    ],
)
def test_errors_are_one_line_on_stderr(argv, needle, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipu-tune: error: ") and needle in lines[0]


def test_a_zoo_name_is_its_preset_aliases_and_the_python_api_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import ipu_tune
    from ipu_tune.cli.profile_cmd import build_parser, model_config

    # An alias's preset names the preset it is (vit_b16 -> vit_b_16): ImageNet-sized.
    vit = model_config(build_parser().parse_args(["vit_b16"]))
    assert vit.name == "vit_b16" and vit.input_shape == [3, 224, 224] and vit.num_classes == 1000
    # A --kwarg merges onto the preset's keyword arguments.
    bert = model_config(build_parser().parse_args(["bert_large", "--kwarg", "masked_positions=56"]))
    assert bert.kwargs == {"vocab_size": 30522, "masked_positions": 56}
    profile = ipu_tune.profile({"name": "resnet50"})
    assert tuple(profile.input_shape) == (3, 224, 224) and profile.num_classes == 1000


def test_a_transformers_model_by_overrides_as_on_the_tuners_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `model=hf` or `hf`, then the model section's keys as the tuner takes them.
    argv = ["model=hf", "model.hf.model_type=bert", "model.hf.config={num_hidden_layers: 2}",
            "model.sequence_length=32", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["input_shape"] == [32] and data["name"] == "hf:bert"
    assert [b for b in data["blocks"] if ".layer." in b] == [
        "bert.encoder.layer.0", "bert.encoder.layer.1"]
    # An override changes a zoo preset too.
    assert main(["resnet50", "model.input_shape=[3,32,32]", "model.num_classes=7", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["input_shape"] == [3, 32, 32] and data["num_classes"] == 7
