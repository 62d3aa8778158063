"""The PopTorch program normalises on the IPU (8-bit I/O) with the statistics of the model's
own dataset."""

from __future__ import annotations

from ipu_tune.config import load_config

from ._render import poptorch_snippet


def _program(dataset: str) -> str:
    cfg = load_config({"model": {"name": "resnet101", "input_shape": [3, 64, 64],
                                 "num_classes": 10, "dataset": {"name": dataset}},
                       "system": {"num_ipus": 1}, "plan": {"eight_bit_io": True}})
    return poptorch_snippet(cfg)


def test_cifar10_programs_use_cifar10_mean_and_std_not_imagenets() -> None:
    text = _program("cifar10")
    assert "0.4914" in text and "0.247" in text
    assert "0.485" not in text


def test_imagenet_programs_keep_imagenets_mean_and_std() -> None:
    text = _program("imagenet")
    assert "0.485" in text and "0.229" in text and "0.4914" not in text
