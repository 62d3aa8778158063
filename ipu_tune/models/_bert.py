"""BERT encoder with the masked-LM head (Devlin et al. 2019, "BERT", section 3 and table 1).

Module names follow Hugging Face ``BertForMaskedLM`` without its ``bert.`` prefix
(``embeddings``, ``encoder.layer.N.attention.self.query``, ``cls.predictions.decoder``), and the
decoder weight is tied to the word embeddings as there, so BERT-Large counts 335.17 M
parameters (Hugging Face: 335,174,458). Attention is written out (matmul, scale, softmax,
matmul) because that is what an IPU runs and what the profiler should see.

As Graphcore runs BERT on IPUs (graphcore/examples nlp/bert popart configs and
nlp/bert/pytorch/modeling.py): `masked_positions` (`model.kwargs.masked_positions`) runs the MLM
head on that many gathered tokens only, Graphcore's `mask_tokens` being 20 / 56 / 76 at sequence
length 128 / 384 / 512 (`auto`, the zoo's bert presets' value, follows the sequence length);
and, pipelined, the head `cls` shares IPU0 with the embedding whose weight it is tied to (the
simulator places a token model's tied `cls` block on the first stage), so the first split
starts the second IPU.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ipu_tune.models._masked import masked_positions as masked_tokens

__all__ = ["BERT_SIZES", "BertForMaskedLM"]

# Table 1 / section 3 of the paper: (layers L, hidden H, heads A); feed-forward is 4H.
BERT_SIZES: dict[str, dict[str, int]] = {
    "base": {"num_layers": 12, "hidden": 768, "num_heads": 12, "intermediate": 3072},
    "large": {"num_layers": 24, "hidden": 1024, "num_heads": 16, "intermediate": 4096},
}


class BertEmbeddings(nn.Module):
    position_ids: Tensor

    def __init__(self, vocab: int, hidden: int, max_positions: int, type_vocab: int, p: float):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(p)
        self.register_buffer("position_ids", torch.arange(max_positions).unsqueeze(0), False)

    def forward(self, input_ids: Tensor) -> Tensor:
        seq = input_ids.shape[1]
        positions = self.position_ids[:, :seq]
        token_types = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_types)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, p: float) -> None:
        super().__init__()
        if hidden % num_heads:
            raise ValueError(f"hidden={hidden} is not a multiple of num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = hidden // num_heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(p)

    def _heads(self, x: Tensor) -> Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        # Scaled dot-product attention (Vaswani et al. 2017, eq. 1).
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).transpose(1, 2)
        return ctx.reshape(x.shape)


class BertResidual(nn.Module):
    """dense -> dropout -> LayerNorm(. + residual): BertSelfOutput and BertOutput."""

    def __init__(self, d_in: int, hidden: int, p: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(p)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, p: float) -> None:
        super().__init__()
        self.self = BertSelfAttention(hidden, num_heads, p)
        self.output = BertResidual(hidden, hidden, p)

    def forward(self, x: Tensor) -> Tensor:
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, intermediate)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x: Tensor) -> Tensor:
        return self.intermediate_act_fn(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, hidden: int, num_heads: int, intermediate: int, p: float) -> None:
        super().__init__()
        self.attention = BertAttention(hidden, num_heads, p)
        self.intermediate = BertIntermediate(hidden, intermediate)
        self.output = BertResidual(intermediate, hidden, p)

    def forward(self, x: Tensor) -> Tensor:
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, num_layers: int, hidden: int, num_heads: int, inter: int, p: float):
        super().__init__()
        self.layer = nn.ModuleList(
            BertLayer(hidden, num_heads, inter, p) for _ in range(num_layers)
        )

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.transform_act_fn = nn.GELU()
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: Tensor) -> Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(hidden)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.transform(x))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, hidden: int, vocab: int, masked_positions: int | str | None) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(hidden, vocab)
        self.masked_positions = masked_positions

    def forward(self, x: Tensor) -> Tensor:
        positions = masked_tokens(self.masked_positions, x.shape[1])
        if positions is not None:
            # Graphcore's IPU BERT gathers the masked tokens first (at most 20 of 128 in phase
            # 1) so that the vocabulary projection runs on those only; the first positions
            # stand in for them (same shapes, same cost).
            x = x[:, :positions]
        return self.predictions(x)


class BertForMaskedLM(nn.Module):
    def __init__(
        self,
        num_layers: int = 12,
        hidden: int = 768,
        num_heads: int = 12,
        intermediate: int = 3072,
        vocab_size: int = 30522,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        masked_positions: int | str | None = None,
    ) -> None:
        super().__init__()
        self.max_position_embeddings = max_position_embeddings
        self.embeddings = BertEmbeddings(
            vocab_size, hidden, max_position_embeddings, type_vocab_size, dropout
        )
        self.encoder = BertEncoder(num_layers, hidden, num_heads, intermediate, dropout)
        self.cls = BertOnlyMLMHead(hidden, vocab_size, masked_positions)
        # Tied input and output embeddings (Hugging Face `tie_weights`; Press & Wolf 2017).
        self.cls.predictions.decoder.weight = self.embeddings.word_embeddings.weight
        self.pipeline_blocks = [
            "embeddings",
            *(f"encoder.layer.{i}" for i in range(num_layers)),
            "cls",
        ]

    def forward(self, input_ids: Tensor) -> Tensor:
        if input_ids.shape[1] > self.max_position_embeddings:
            raise ValueError(
                f"sequence length {input_ids.shape[1]} exceeds max_position_embeddings="
                f"{self.max_position_embeddings}"
            )
        return self.cls(self.encoder(self.embeddings(input_ids)))
