"""Charge a tied output head to the first pipeline block, where optimum-graphcore runs it.

A masked-LM or causal-LM head whose projection shares its weight with the input embeddings runs
on IPU0 beside the embeddings (`PipelinedBertForPreTraining.parallelize`,
`PipelinedGPT2LMHeadModel.parallelize`, `PipelinedT5ForConditionalGeneration.parallelize` in
optimum-graphcore 0.7.1: ``BeginBlock(self.cls / self.lm_head, ..., ipu_id=0)``): the weight is
stored once, and the last stage sends its hidden states back to IPU0. Stages are runs of
consecutive blocks, so the head's ops are moved into block 0 of the profile (op order inside a
block only matters for the sums and peaks computed here). Whisper's tied projection runs with the
decoder's embeddings instead, on the IPU of decoder layer 0
(`PipelinedWhisperForConditionalGeneration.parallelize`: `ipu_id=decoder_embedding_ipu`): `into`.
"""

from __future__ import annotations

from dataclasses import replace

from ipu_tune.models._profile import BlockProfile, ModelProfile, OpProfile

__all__ = ["fold_head"]


def _is_head(op: OpProfile, head: str) -> bool:
    # The loss follows the logits it reads (the profiler names its op "loss").
    return op.name == head or op.name.startswith(head + ".") or op.name.startswith("loss")


def _totals(block: BlockProfile, ops: list[OpProfile], first: int, output_elements: int,
            max_live_elements: int) -> BlockProfile:  # fmt: skip
    return replace(
        block,
        output_elements=output_elements,
        max_live_elements=max_live_elements,
        first_op=first,
        last_op=first + len(ops),
        forward_flops=sum(o.forward_flops for o in ops),
        backward_flops=sum(o.backward_flops for o in ops),
        parameters=sum(o.parameters for o in ops),
        saved_elements=sum(o.saved_elements for o in ops),
    )


def fold_head(profile: ModelProfile, head: str, into: int = 0) -> ModelProfile:
    """`profile` with the ops of module `head` (and the loss) moved into block `into` from the
    blocks after it."""
    stats = profile.block_stats
    if len(stats) < into + 2:
        return profile
    moved = [o for o in profile.ops if o.block > into and _is_head(o, head)]
    if not moved:
        return profile
    last = len(stats) - 1
    per_block: list[list[OpProfile]] = [[] for _ in stats]
    for op in profile.ops:
        if op.block > into and _is_head(op, head):
            per_block[into].append(replace(op, block=into))
        else:
            per_block[op.block].append(op)
    # What the last block now sends on: the output of its last op that stays (the final
    # norm's hidden states), over the IPU-Links to IPU0.
    tail = per_block[last][-1].output_elements if per_block[last] else stats[last].output_elements
    head_live = max(stats[o.block].max_live_elements for o in moved)
    new_stats = []
    first = 0
    for b, block in enumerate(stats):
        live = max(block.max_live_elements, head_live) if b == into else block.max_live_elements
        out = tail if b == last else block.output_elements
        new_stats.append(_totals(block, per_block[b], first, out, live))
        first += len(per_block[b])
    ops = tuple(op for block_ops in per_block for op in block_ops)
    return replace(profile, ops=ops, block_stats=tuple(new_stats), tied_head=head,
                   tied_head_block=stats[into].name)
