"""A model the meta device cannot run, for want of values, runs its traced step on the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from ipu_tune import IpuTuneError
from ipu_tune.models import _cpu_step, clear_memory_cache, profile_model
from ipu_tune.models._cpu_step import usual_token_id

from .conftest import model_cfg

F = "tests.models.factories"


@pytest.fixture(autouse=True)
def _fresh_profiles(tmp_path: Any, monkeypatch: Any) -> None:
    """Profiled anew: neither the disk nor the process cache holds the factories' profiles."""
    monkeypatch.setenv("IPU_TUNE_CACHE_DIR", str(tmp_path))
    clear_memory_cache()


def test_a_factory_reading_a_value_profiles_on_the_cpu() -> None:
    state = torch.get_rng_state()
    profile = profile_model(model_cfg(_target_=f"{F}.needs_values", input_shape=[8]))
    # One Linear(8, 2): 2 FLOPs per multiply-add, forward; its weight and data gradients.
    assert profile.parameters == 8 * 2 + 2
    assert profile.forward_flops == 2 * 8 * 2
    assert torch.equal(torch.get_rng_state(), state)  # the caller's random state is untouched
    # Why, kept for the exports: PopTorch compiles fixed shapes with no host reads either.
    assert profile.meta_failure.startswith("RuntimeError: ") and "meta" in profile.meta_failure
    assert profile_model(model_cfg(name="mnist_cnn", input_shape=[1, 28, 28])).meta_failure == ""


def test_the_poptorch_program_of_a_model_traced_on_the_cpu_says_why() -> None:
    from ipu_tune.config import EvalConfig
    from ipu_tune.exports._model_source import model_lines

    cfg = model_cfg(_target_=f"{F}.needs_values", input_shape=[8])
    lines = "\n".join(model_lines(EvalConfig(model=cfg), profile_model(cfg)))
    assert "# Traced on the CPU: on the meta device its step ran RuntimeError: " in lines
    assert "may not compile under PopTorch" in lines


def test_a_model_too_large_for_this_machine_is_not_run_on_the_cpu(monkeypatch: Any) -> None:
    need = 8 * (8 * 2 + 2)  # bytes of fp32 weights and gradients
    monkeypatch.setattr(_cpu_step, "_memory_bytes", lambda: 4 * need - 4)
    with pytest.raises(IpuTuneError) as info:
        profile_model(model_cfg(_target_=f"{F}.needs_values", input_shape=[8]))
    message = str(info.value)
    assert message.startswith("model._target_='tests.models.factories.needs_values': cannot run "
                              "forward and backward on the meta device (RuntimeError: ")
    assert message.endswith("a step on the CPU was not tried: its 18 parameters need 0.00 GB "
                            "of fp32 weights and gradients, more than a quarter of this "
                            "machine's memory (0.00 GB)")
    monkeypatch.setattr(_cpu_step, "_memory_bytes", lambda: 4 * need)
    clear_memory_cache()
    assert profile_model(model_cfg(_target_=f"{F}.needs_values",
                                   input_shape=[8])).parameters == 18


class _Config:
    def __init__(self, **ids: Any) -> None:
        self.__dict__.update(ids)


class _Model(nn.Module):
    def __init__(self, **ids: Any) -> None:
        super().__init__()
        self.config = _Config(**ids)


@pytest.mark.parametrize(("ids", "usual"), [
    ({}, 0),
    ({"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": [2, 3]}, 4),
    ({"pad_token_id": 1, "mask_token_id": 103}, 0),
    # XLM's specials: bos 0, eos 1, pad 2, unk 3, mask 5.
    ({"bos_index": 0, "eos_index": 1, "pad_index": 2, "unk_index": 3, "mask_index": 5}, 4),
    ({"pad_token_id": None, "vocab_size": 0}, 0),  # a size is no token id
])
def test_the_usual_token_is_no_special_token(ids: dict[str, Any], usual: int) -> None:
    assert usual_token_id(_Model(**ids)) == usual


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="bounds need Linux's /proc")
def test_a_step_allocating_past_its_share_of_memory_is_refused(monkeypatch: Any) -> None:
    """4 GB of activations against a share of 1 GB: one line, not a swapping machine."""
    monkeypatch.setattr(_cpu_step, "_memory_bytes", lambda: 4 * 2**30)
    with pytest.raises(IpuTuneError) as info:
        profile_model(model_cfg(_target_=f"{F}.reads_then_allocates", input_shape=[8]))
    message = str(info.value)
    assert "cannot run forward and backward on the meta device (" in message
    assert "nor on the CPU (RuntimeError: " in message and "can't allocate memory" in message
    torch.zeros(2**28)  # 1 GB: the bound is lifted after the step
