"""How many tokens a masked-LM head runs on: `model.kwargs.masked_positions`.

Graphcore's IPU BERT gathers the masked tokens before the MLM head, so that the vocabulary
projection runs on those only (optimum-graphcore: `config.max_num_masked_tokens`). `auto` is
the count Graphcore's BERT configs give for the sequence length (`mask_tokens`), and elsewhere
BERT's masking rate of the sequence, rounded up (Devlin et al. 2019, section 3.1: 15% of the
tokens). A pack of several sequences (`model.dataset.sequences_per_pack`) fills one sequence
length, so the same count serves it. No torch import: the exports read it.
"""

from __future__ import annotations

import math
from typing import Any

from ipu_tune.errors import bad_value

__all__ = ["AUTO_MASKED", "GRAPHCORE_MASKED_TOKENS", "MASKING_RATE", "masked_positions"]

AUTO_MASKED = "auto"
# Sequence length -> masked tokens, Graphcore's BERT PopART configs (pretrain_*_128/384/512).
GRAPHCORE_MASKED_TOKENS = {128: 20, 384: 56, 512: 76}
MASKING_RATE = 0.15

_KEY = "model.kwargs.masked_positions"


def masked_positions(value: Any, sequence_length: int) -> int | None:
    """The tokens the head runs on for `value` (an integer, `auto` or None: every token) at
    `sequence_length`; a bad value is one line naming the key."""
    if value is None:
        return None
    if value == AUTO_MASKED:
        default = math.ceil(MASKING_RATE * sequence_length)
        return min(sequence_length, GRAPHCORE_MASKED_TOKENS.get(sequence_length, default))
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= sequence_length:
        counts = ", ".join(f"{n} at {length}" for length, n in GRAPHCORE_MASKED_TOKENS.items())
        raise bad_value(_KEY, value, f"an integer from 1 to the sequence length {sequence_length},"
                                     f" {AUTO_MASKED!r} (Graphcore's count for the length: "
                                     f"{counts}) or null (every token)")
    return value
