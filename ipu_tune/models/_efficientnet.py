"""EfficientNet-B0..B4 (Tan & Le 2019, "EfficientNet", table 1 and section 3.3), torchvision layout.

Written with torch alone (torchvision does not install beside this torch) with torchvision's
module names and structure (`torchvision/models/efficientnet.py`, `EfficientNet`, `MBConv`,
`Conv2dNormActivation`, `SqueezeExcitation`): `features.0` stem, `features.1..7` stages of MBConv
blocks (`features.N.M.block.K`), `features.8` 1x1 head convolution, `avgpool`, `classifier`. The
parameter counts are torchvision's (B0: 5,288,548; tests/models/test_efficientnet.py).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

__all__ = ["EFFICIENTNET", "EfficientNet"]

# (expand ratio, kernel, stride, input channels, output channels, layers) of B0 (table 1).
_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
       (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))  # fmt: skip
# Variant: (width multiplier, depth multiplier, dropout, resolution), torchvision's builders.
EFFICIENTNET = {
    "efficientnet_b0": (1.0, 1.0, 0.2, 224),
    "efficientnet_b1": (1.0, 1.1, 0.2, 240),
    "efficientnet_b2": (1.1, 1.2, 0.3, 288),
    "efficientnet_b3": (1.2, 1.4, 0.3, 300),
    "efficientnet_b4": (1.4, 1.8, 0.4, 380),
}


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision `_make_divisible`: round to a multiple of 8, never more than 10% down."""
    new = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * value else new


class Conv2dNormActivation(nn.Sequential):
    """Conv (no bias) + BatchNorm + optional SiLU, as torchvision.ops.Conv2dNormActivation."""

    def __init__(self, c_in: int, c_out: int, kernel: int = 3, stride: int = 1, groups: int = 1,
                 activation: bool = True) -> None:  # fmt: skip
        layers: list[nn.Module] = [
            nn.Conv2d(c_in, c_out, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(c_out),
        ]
        if activation:
            layers.append(nn.SiLU(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Hu et al. 2018: channel weights from a pooled squeeze (torchvision.ops.SqueezeExcitation)."""

    def __init__(self, channels: int, squeeze: int) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.SiLU(inplace=True)
        self.scale_activation = nn.Sigmoid()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class MBConv(nn.Module):
    """Mobile inverted bottleneck (Sandler et al. 2018) with squeeze-excitation."""

    def __init__(self, expand: int, kernel: int, stride: int, c_in: int, c_out: int) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and c_in == c_out
        expanded = _divisible(c_in * expand)
        layers: list[nn.Module] = []
        if expanded != c_in:
            layers.append(Conv2dNormActivation(c_in, expanded, kernel=1))
        layers += [
            Conv2dNormActivation(expanded, expanded, kernel, stride, groups=expanded),
            SqueezeExcitation(expanded, max(1, c_in // 4)),
            Conv2dNormActivation(expanded, c_out, kernel=1, activation=False),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        out = self.block(x)
        # torchvision's StochasticDepth drops whole residual branches at random in training;
        # in expectation it scales them, an elementwise op the profile can leave out.
        return out + x if self.use_res_connect else out


class EfficientNet(nn.Module):
    def __init__(self, width: float, depth: float, dropout: float, num_classes: int = 1000,
                 in_channels: int = 3) -> None:  # fmt: skip
        super().__init__()
        stem = _divisible(_B0[0][3] * width)
        layers: list[nn.Module] = [Conv2dNormActivation(in_channels, stem, 3, 2)]
        blocks = ["features.0"]
        for s, (expand, kernel, stride, c_in, c_out, n) in enumerate(_B0, start=1):
            c_in, c_out = _divisible(c_in * width), _divisible(c_out * width)
            stage = []
            for i in range(math.ceil(n * depth)):
                stage.append(MBConv(expand, kernel, stride if i == 0 else 1,
                                    c_in if i == 0 else c_out, c_out))  # fmt: skip
                blocks.append(f"features.{s}.{i}")
            layers.append(nn.Sequential(*stage))
        last_in = _divisible(_B0[-1][4] * width)
        layers.append(Conv2dNormActivation(last_in, 4 * last_in, kernel=1))
        blocks.append(f"features.{len(_B0) + 1}")
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout, inplace=True),
                                        nn.Linear(4 * last_in, num_classes))  # fmt: skip
        # The classifier's stage begins at the pooling before it (as ResNet's `fc`).
        self.pipeline_blocks: list[str | tuple[str, str]] = [*blocks, ("classifier", "avgpool")]

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))
