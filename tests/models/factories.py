"""Model factories named by `model._target_` in the tests (imported as tests.models.factories)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def tiny_mlp(width: int = 16) -> nn.Module:
    return nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4))


def dropout_mlp() -> nn.Module:
    """`tiny_mlp` with a dropout after its ReLU (p = 0.5: torch multiplies by a random mask)."""
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 4))


class Merge(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        return self.fc(x + skip)


class SkipNet(nn.Module):
    """Block `a`'s output is read again in block `c`: it must cross both boundaries."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.c = Merge()
        self.pipeline_blocks = ["a", "b", "c"]

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        return self.c(self.b(h), h)


def skip_net() -> nn.Module:
    return SkipNet()


class MaskedNet(nn.Module):
    """Block `a` makes a causal mask from the input's shape alone (as Transformers' GPT-2
    does once for every layer) and a mask of values; blocks `b` and `c` read both."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(8, 3)
        self.pipeline_blocks = ["a", "b", "c"]

    def forward(self, x: Tensor) -> Tensor:
        h = self.a(x)
        n = torch.arange(8, device=x.device)
        causal = torch.where(n[:, None] >= n[None, :], 0.0, -1e4)  # 64 elements, no values
        weights = torch.softmax(torch.ones_like(x)[:, :, None] + causal, dim=-1)  # 2 x 64
        by_value = h[:, :, None] * h[:, None, :]  # 8 x 8 from the values: must cross
        h = self.b(h + (weights * by_value).sum(-1))
        return self.c(h + (causal[None] * by_value).sum(-1))


def masked_net() -> nn.Module:
    return MaskedNet()


class VmapMaskNet(nn.Module):
    """Builds its mask under `torch.vmap`, as Transformers' `masking_utils` does (T5Gemma 2):
    a torch function there returns a batched wrapper, which holds no storage."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        n = torch.arange(8, device=x.device)
        mask = torch.vmap(lambda q: q.new_ones((), dtype=torch.bool) & (n <= q))(n)
        h = self.a(x)
        return (h[:, :, None] * mask).sum(-1)


def vmap_mask_net() -> nn.Module:
    return VmapMaskNet()


class NeedsValues(nn.Module):
    """Reads tensor values, which the meta device does not have."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        if x.sum().item() > 0:
            return self.fc(x)
        return self.fc(-x)


def needs_values() -> nn.Module:
    return NeedsValues()


class BadBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 2)
        self.pipeline_blocks = ["second", "first"]  # out of execution order

    def forward(self, x: Tensor) -> Tensor:
        return self.second(self.first(x))


def bad_blocks() -> nn.Module:
    return BadBlocks()


def not_a_module() -> int:
    return 3


def broken(**kwargs: object) -> nn.Module:
    raise RuntimeError("factory exploded\nsecond line")


NOT_CALLABLE = 42


def one_block() -> nn.Module:
    """A model of one block: no pipeline split exists."""
    return nn.Linear(8, 4)


def token_classifier() -> nn.Module:
    """Reads token ids: its first module is an embedding."""
    return nn.Sequential(nn.Embedding(100, 8), nn.Flatten(), nn.Linear(8 * 6, 2))


def tiny_cnn() -> nn.Module:
    """Reads floats: a convolution takes no integer ids."""
    return nn.Sequential(nn.Conv1d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 6, 2))


class ReadsThenFails(nn.Module):
    """Reads a tensor's value, and fails on the value it reads (a real run's error)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        if x.abs().sum().item() == 0:
            raise ValueError("an input of zeros")
        return self.fc(x)


def reads_then_fails() -> nn.Module:
    return ReadsThenFails()


class ReadsThenAllocates(nn.Module):
    """Reads a tensor's value, then makes an activation of 4 GB (a long sequence's)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: Tensor) -> Tensor:
        if x.sum().item() >= 0:
            x = x + torch.zeros(2**30, 1, device=x.device).sum()
        return self.fc(x)


def reads_then_allocates() -> nn.Module:
    return ReadsThenAllocates()
