"""BERT as Graphcore runs it: the tied MLM head on IPU0 beside the embedding, the encoder from
the next IPU, the head on the masked tokens only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ipu_tune.config import ModelConfig
from ipu_tune.hardware import make_system
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import simulate

PLAN = ExecutionPlan(micro_batch_size=8, optimizer="lamb", precision="16.16", partials="half",
                     gradient_accumulation=64, recompute="every_block",
                     splits=("encoder.layer.0", "encoder.layer.4", "encoder.layer.8"))


@pytest.fixture(scope="module")
def bert_base() -> ModelProfile:
    return profile_model(ModelConfig(name="bert_base", sequence_length=128,
                                     kwargs={"vocab_size": 30522, "masked_positions": 20}))


def test_tied_head_runs_on_ipu0_and_the_last_stage_sends_back(bert_base: ModelProfile) -> None:
    r = simulate(bert_base, make_system("mk2", 4), PLAN)
    head = bert_base.block_stats[-1]
    embeddings = bert_base.block_stats[0]
    assert head.name == "cls"
    # IPU0 holds the embedding (with the tied word embeddings) and the head's own parameters.
    weights0 = r.memory[0].categories["weights"]
    assert weights0 == (embeddings.parameters + head.parameters) * 2
    # The last stage holds exactly its four encoder layers.
    layer = bert_base.block_stats[bert_base.block_index("encoder.layer.8")].parameters
    assert r.memory[3].categories["weights"] == 4 * layer * 2
    # Its output goes back to IPU0 over the IPU-Links (a plain chain's last stage sends none).
    assert r.stages[3].inter_ipu_s > 0.0
    assert r.stages[0].forward_s > 0.0 and r.stages[0].blocks == ("embeddings", "embeddings")
    # The stage rows say IPU0 runs the head too, and a stored result reads back the same.
    assert r.stages[0].also == ("cls",) and all(not s.also for s in r.stages[1:])
    assert r.to_dict()["stages"][0]["also"] == ["cls"]


def test_unpipelined_bert_keeps_every_block_on_its_one_ipu(bert_base: ModelProfile) -> None:
    plan = ExecutionPlan(micro_batch_size=4, optimizer="lamb", precision="16.16")
    r = simulate(bert_base, make_system("mk2", 1), plan)
    assert r.memory[0].categories["weights"] == bert_base.parameters * 2
    assert r.stages[0].blocks == ("embeddings", "cls") and r.stages[0].also == ()


def test_masked_positions_shrink_the_head_cost(bert_base: ModelProfile) -> None:
    full = profile_model(ModelConfig(name="bert_base", sequence_length=128,
                                     kwargs={"vocab_size": 30522, "masked_positions": None}))
    system = make_system("mk2", 4)
    masked, every = simulate(bert_base, system, PLAN), simulate(full, system, PLAN)
    assert masked.stages[0].forward_s < every.stages[0].forward_s
    assert masked.stages[3].forward_s == pytest.approx(every.stages[3].forward_s)


@pytest.mark.parametrize(("sequence_length", "tokens"), [
    (128, 20), (384, 56), (512, 76),  # Graphcore's BERT configs' mask_tokens
    (256, 39), (64, 10),              # elsewhere 15% of the tokens, rounded up
])
def test_auto_masked_positions_follow_the_sequence_length(sequence_length: int,
                                                          tokens: int) -> None:
    def head_gflop(masked: object) -> float:
        profile = profile_model(ModelConfig(name="bert_base", sequence_length=sequence_length,
                                            kwargs={"masked_positions": masked}))
        return profile.block_stats[profile.block_index("cls")].forward_flops

    assert head_gflop("auto") == pytest.approx(head_gflop(tokens))
    assert head_gflop("auto") < head_gflop(tokens + 1)


def test_the_bert_presets_follow_the_sequence_length() -> None:
    from ipu_tune.config import compose

    cfg = compose(["model=bert_large", "model.sequence_length=384"])
    assert cfg.model.kwargs["masked_positions"] == "auto"
    assert cfg.model.dataset.sample_bytes is None
    profile = profile_model(cfg.model)
    assert profile.sample_bytes == 3 * 384 * 4  # ids, mask, token types as int32


def test_a_stage_of_the_head_alone_holds_the_weight_it_shares(bert_base: ModelProfile) -> None:
    """Split at `cls`, the head runs on the last IPU, which needs the word embeddings' weight
    (its decoder): before, that stage held the head's own 0.6 M parameters only, a plan the
    search and the remedies could pick for being small."""
    from dataclasses import replace

    plan = replace(PLAN, splits=("encoder.layer.4", "encoder.layer.8", "cls"))
    r = simulate(bert_base, make_system("mk2", 4), plan)
    head = bert_base.block_stats[-1]
    tied = 30522 * 768  # BERT-Base's word embeddings, vocabulary x hidden
    assert r.stages[3].blocks == ("cls", "cls") and r.stages[3].also == ()
    assert r.memory[3].categories["weights"] == (head.parameters + tied) * 2
    assert r.memory[0].categories["weights"] == bert_base.block_stats[0].parameters * 2 + sum(
        b.parameters for b in bert_base.block_stats[1:5]) * 2  # no head on IPU0 now


def test_a_folded_transformers_head_receives_the_last_stages_output() -> None:
    """GPT-2's `lm_head` (tied to `wte`) runs on IPU0 with the embeddings: the last stage's
    hidden states cross back to it, as BERT's do to `cls`."""
    from ipu_tune.config import HfConfig

    gpt2 = profile_model(ModelConfig(name="hf", sequence_length=128,
                                     hf=HfConfig(model_type="gpt2", config={"n_layer": 4})))
    assert gpt2.tied_head == "lm_head"
    plan = ExecutionPlan(micro_batch_size=4, precision="16.16", gradient_accumulation=16,
                         splits=("transformer.h.2",))
    r = simulate(gpt2, make_system("mk2", 2), plan)
    assert r.stages[0].also == ("lm_head",)
    # The last stage receives the hidden states and sends its own back: twice IPU0's send.
    assert r.stages[-1].inter_ipu_s == pytest.approx(2 * r.stages[0].inter_ipu_s)


def test_the_heads_own_stage_is_stashed_at_the_last_stages_depth(bert_base: ModelProfile) -> None:
    """Without recomputation IPU0 stashes its embedding's activations for 2N+1 = 9 micro-batches
    (seed guide 4.2) and the head's for 3, the depth of the pipeline's last stage, which the
    head is: its backward right after its forward."""
    from ipu_tune.simulator import stash_depth

    plan = replace(PLAN, recompute="none", micro_batch_size=2)
    r = simulate(bert_base, make_system("mk2", 4), plan)
    embeddings, head = (bert_base.block_stats[0].saved_elements,
                        bert_base.block_stats[-1].saved_elements)
    assert head > 0
    expected = (stash_depth("grouped", 4, 0) * embeddings + stash_depth("grouped", 4, 3) * head)
    assert r.memory[0].categories["activation_stash"] == round(expected * 2 * 2)
    assert r.extras["stash_depths"] == [9, 7, 5, 3]


def test_the_heads_own_stage_adds_a_slot_to_the_ramp(bert_base: ModelProfile) -> None:
    """The program runs 5 stages on 4 IPUs: one more fill and drain slot than 4 stages, at the
    longest stage's forward and backward (the steady slot is unchanged: IPU0 runs both)."""
    from ipu_tune.simulator._pipeline import pipeline_step, stage_parts

    parts = [stage_parts(1.0, 0.0, 0.0, 2.0, 0.0, 0.0), stage_parts(3.0, 0.0, 0.0, 5.0, 0.0, 0.0),
             stage_parts(2.0, 0.0, 0.0, 4.0, 0.0, 0.0)]
    plain = pipeline_step(parts, "grouped", 8, True)
    head = pipeline_step(parts, "grouped", 8, True, head_stages=1)
    assert plain.ramp == pytest.approx((1 + 2) + (3 + 5))
    assert head.ramp == pytest.approx(plain.ramp + (3 + 5))
    assert (head.compute, head.slot) == (plain.compute, plain.slot)
    interleaved = pipeline_step(parts, "interleaved", 8, True, head_stages=1)
    assert interleaved.ramp == pytest.approx(2 * 3 * interleaved.slot)


def test_under_recomputation_the_heads_stage_checkpoints_its_input(
        bert_base: ModelProfile) -> None:
    """Pipeline recomputation checkpoints every stage's input: the head's own stage on IPU0
    keeps the last stage's output, for the last stage's depth of micro-batches."""
    from ipu_tune.simulator import stash_depth

    plan = replace(PLAN, recompute="checkpoints", micro_batch_size=2)
    r = simulate(bert_base, make_system("mk2", 4), plan)
    tokens = bert_base.input_elements
    encoder_out = bert_base.block_stats[-2].output_elements
    expected = (stash_depth("grouped", 4, 0) * tokens + stash_depth("grouped", 4, 3) * encoder_out)
    assert r.memory[0].categories["recompute_checkpoints"] == round(expected * 2 * 2)
    assert r.memory[1].categories["recompute_checkpoints"] == round(
        stash_depth("grouped", 4, 1) * encoder_out * 2 * 2)
