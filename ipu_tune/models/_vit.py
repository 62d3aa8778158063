"""Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words", eq. 1-4 and
table 1), with torchvision's module and parameter names (torchvision/models/vision_transformer.py
v0.19): ``conv_proj``, ``class_token``, ``encoder.pos_embedding``,
``encoder.layers.encoder_layer_N`` (``ln_1``, ``self_attention``, ``ln_2``, ``mlp``),
``encoder.ln``, ``heads.head``. ViT-B/16 at 224x224 and 1000 classes has 86,567,656 parameters,
as torchvision's. Attention keeps `nn.MultiheadAttention`'s packed ``in_proj_weight`` but is
written out (matmul, softmax, matmul) so the profiler sees the ops an IPU runs.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["VisionTransformer"]


class SelfAttention(nn.Module):
    """Multi-head self-attention with nn.MultiheadAttention's parameters."""

    def __init__(self, dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"hidden_dim={dim} is not a multiple of num_heads={num_heads}")
        self.num_heads = num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * dim))
        self.out_proj = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        b, s, d = x.shape
        h = self.num_heads
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias)
        q, k, v = (t.reshape(b, s, h, d // h).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // h)
        probs = F.dropout(torch.softmax(scores, dim=-1), self.dropout, self.training)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, d)
        return self.out_proj(ctx)


class MLPBlock(nn.Sequential):
    def __init__(self, dim: int, mlp_dim: int, dropout: float) -> None:
        super().__init__(
            nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(mlp_dim, dim), nn.Dropout(dropout),
        )  # fmt: skip


class EncoderBlock(nn.Module):
    def __init__(self, heads: int, dim: int, mlp_dim: int, dropout: float, attn_drop: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = SelfAttention(dim, heads, attn_drop)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLPBlock(dim, mlp_dim, dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.self_attention(self.ln_1(x)))
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq: int, layers: int, heads: int, dim: int, mlp_dim: int,
                 dropout: float, attn_drop: float) -> None:  # fmt: skip
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, dim))
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.Sequential(
            OrderedDict(
                (f"encoder_layer_{i}", EncoderBlock(heads, dim, mlp_dim, dropout, attn_drop))
                for i in range(layers)
            )
        )
        self.ln = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x: Tensor) -> Tensor:
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class VisionTransformer(nn.Module):
    def __init__(
        self,
        image_size: int = 224,
        patch_size: int = 16,
        num_layers: int = 12,
        num_heads: int = 12,
        hidden_dim: int = 768,
        mlp_dim: int = 3072,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        num_classes: int = 1000,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"image size {image_size} is not a multiple of patch {patch_size}")
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.conv_proj = nn.Conv2d(in_channels, hidden_dim, patch_size, stride=patch_size)
        seq = (image_size // patch_size) ** 2 + 1  # patches + the class token
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.encoder = Encoder(
            seq, num_layers, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout
        )
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(hidden_dim, num_classes)))
        self.pipeline_blocks = [
            "conv_proj",
            *(f"encoder.layers.encoder_layer_{i}" for i in range(num_layers)),
            "heads",
        ]

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.hidden_dim, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.encoder(x)
        return self.heads(x[:, 0])
