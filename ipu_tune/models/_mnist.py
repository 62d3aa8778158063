"""The 4-block MNIST CNN of the PopTorch pipelining tutorial (docs/references.md:
"Model definition"): blocks B1..B4 are the modules
layer1..layer4; the ReLU after layer3 runs in block B3 and the loss in B4, as there."""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["ConvLayer", "MnistCnn"]


class ConvLayer(nn.Module):
    def __init__(self, in_channels: int, num_filters: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.pool(self.conv(x)))


class MnistCnn(nn.Module):
    def __init__(self, in_channels: int = 1, height: int = 28, width: int = 28,
                 num_classes: int = 10, hidden: int = 256) -> None:  # fmt: skip
        super().__init__()
        self.layer1 = ConvLayer(in_channels, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        # 28x28 -> conv5 24 -> pool 12 -> conv5 8 -> pool 4: 20*4*4 = 320 features, as the seed.
        h, w = ((height - 4) // 2 - 4) // 2, ((width - 4) // 2 - 4) // 2
        if h < 1 or w < 1:
            raise ValueError(f"input {height}x{width} is too small for two conv5+pool2 layers")
        self.features = 20 * h * w
        self.layer3 = nn.Linear(self.features, hidden)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(hidden, num_classes)
        self.pipeline_blocks = ["layer1", "layer2", "layer3", "layer4"]

    def forward(self, x: Tensor) -> Tensor:
        x = self.layer2(self.layer1(x))
        x = x.view(-1, self.features)
        x = self.layer3_act(self.layer3(x))
        return self.layer4(x)
