"""What the profiler measures: FLOPs, saved and live elements, blocks, matmul views."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from ipu_tune.models import OP_KINDS, build_model
from ipu_tune.models._aten import count_flops

from .conftest import conf, model_cfg

TINY_MLP = "tests.models.factories.tiny_mlp"


def _flop_counter_totals(fields: dict[str, Any], x: torch.Tensor) -> tuple[float, float]:
    """Forward and backward FLOPs per sample by torch's FlopCounterMode on a plain run."""
    with torch.device("meta"):
        model, _ = build_model(model_cfg(**fields))
    with FlopCounterMode(display=False) as fwd:
        logits = model(x)
        target = torch.zeros(logits.shape[:-1], dtype=torch.long, device="meta")
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, -2), target.flatten())
    with FlopCounterMode(display=False) as bwd:
        loss.backward()
    return fwd.get_total_flops() / len(x), bwd.get_total_flops() / len(x)


@pytest.mark.parametrize(
    ("fields", "example"),
    [
        ({"name": "resnet18", "input_shape": [3, 64, 64]}, (3, 64, 64)),
        ({"name": "bert_base", "sequence_length": 32}, None),
        ({"name": "vit_b_16", "input_shape": [3, 32, 32]}, (3, 32, 32)),
    ],
)
def test_flops_equal_torch_flop_counter(fields, example, profile_of) -> None:
    prof = profile_of(**fields)
    if example is None:
        x = torch.zeros(3, 32, dtype=torch.long, device="meta")
    else:
        x = torch.empty(3, *example, device="meta")
    fwd, bwd = _flop_counter_totals(fields, x)
    assert prof.forward_flops == fwd
    assert prof.backward_flops == bwd


def test_backward_is_twice_forward_except_the_stem_input_gradient(profile_of) -> None:
    # Every conv/linear computes an input and a weight gradient, each as many MACs as forward,
    # except the first conv (the image needs no gradient). Holds for grouped convs too, where
    # torch's own counter overcounts the weight gradient (see count_flops).
    for name in ("resnet50", "resnext50_32x4d"):
        prof = profile_of(**conf(name))
        stem = prof.ops[0]
        assert stem.name == "conv1"
        assert stem.backward_flops == stem.forward_flops
        assert prof.backward_flops == 2 * prof.forward_flops - stem.forward_flops
        for op in prof.ops[1:]:
            assert op.backward_flops == 2 * op.forward_flops, op.name


def test_grouped_conv_backward_correction() -> None:
    x = torch.empty(2, 64, 8, 8, device="meta", requires_grad=True)
    w = torch.empty(64, 2, 3, 3, device="meta", requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, padding=1, groups=32)
    fwd = 2 * 2 * 8 * 8 * 64 * 2 * 9
    gy = torch.empty_like(y)
    args = (gy, x, w, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 32, [True, True, False])
    out = torch.ops.aten.convolution_backward.default(*args)
    assert count_flops(torch.ops.aten.convolution_backward.default, args, {}, out) == 2 * fwd


def test_matmul_view_reproduces_the_flops(profile_of) -> None:
    for name in ("resnext50_32x4d", "bert_base", "vit_b_16"):
        prof = profile_of(**conf(name))
        for op in prof.ops:
            if op.kind in ("conv", "matmul"):
                assert 2 * op.m_per_sample * op.k * op.n == op.forward_flops, op.name
            else:
                assert (op.m_per_sample, op.k, op.n) == (0, 0, 0)
    stem = profile_of(**conf("resnet50")).ops[0]
    assert (stem.m_per_sample, stem.k, stem.n) == (112 * 112, 3 * 7 * 7, 64)


def test_convolutions_record_their_groups(profile_of) -> None:
    """A convolution keeps torch's `groups`: a depthwise one has one output channel per group
    (EfficientNet), ResNeXt's 32x4d its 32 groups; every other op has 1."""
    depthwise = [op for op in profile_of(**conf("efficientnet_b0")).ops
                 if op.kind == "conv" and op.groups > 1]
    assert depthwise and all(op.groups == op.n for op in depthwise)
    resnext = profile_of(**conf("resnext50_32x4d")).ops
    assert {op.groups for op in resnext if op.kind == "conv"} == {1, 32}
    assert {op.groups for op in profile_of(**conf("resnet50")).ops} == {1}
    assert all(op.groups == 1 for op in resnext if op.kind != "conv")


def test_attention_second_operands_are_counted_per_sample(profile_of) -> None:
    """Attention multiplies each sample's queries by its own keys, one K x N matrix per head;
    a Linear or a conv multiplies every sample by one shared weight (no matrices per sample)."""
    for name, heads in (("bert_base", 12), ("vit_b_16", 12)):
        prof = profile_of(**conf(name))
        mms = [op for op in prof.ops if op.kind in ("conv", "matmul")]
        own = [op for op in mms if op.rhs_per_sample]
        assert own and all(op.parameters == 0 and op.rhs_per_sample == heads for op in own)
        assert all(op.parameters > 0 for op in mms if not op.rhs_per_sample), name
    assert not any(op.rhs_per_sample for op in profile_of(**conf("resnet50")).ops)


def test_saved_elements_follow_autograd(profile_of) -> None:
    prof = profile_of(_target_=TINY_MLP, input_shape=[8], kwargs={"width": 16})
    assert [op.name for op in prof.ops] == ["0", "1", "2", "loss"]
    # No pipeline_blocks attribute: the top-level children (a Sequential's items) are blocks.
    assert prof.blocks == ["0", "1", "2"]
    assert [op.kind for op in prof.ops] == ["matmul", "elementwise", "matmul", "loss"]
    # Linear saves its input (8); ReLU its output (16), which the next Linear reuses; the loss
    # keeps its log-softmax (4).
    assert [op.saved_elements for op in prof.ops] == [8, 16, 0, 4]
    assert [op.output_elements for op in prof.ops] == [16, 16, 4, 0]
    assert [op.parameters for op in prof.ops] == [8 * 16 + 16, 0, 16 * 4 + 4, 0]


def test_a_dropout_keeps_no_mask_for_the_backward(profile_of) -> None:
    """torch saves a dropout's random mask (16 per sample) for its backward; PopART draws the
    mask again from the step's seed there, so no activation holds it. The dropout's output,
    which the next Linear saves, is counted as any other."""
    prof = profile_of(_target_="tests.models.factories.dropout_mlp", input_shape=[8])
    assert [op.name for op in prof.ops] == ["0", "1", "2", "3", "loss"]
    assert [op.saved_elements for op in prof.ops] == [8, 16, 0, 16, 4]


def test_elements_that_skip_a_block_cross_every_boundary(profile_of) -> None:
    prof = profile_of(_target_="tests.models.factories.skip_net", input_shape=[8])
    assert prof.blocks == ["a", "b", "c"]
    a, b, c = prof.block_stats
    assert a.output_elements == 8
    assert b.output_elements == 8 + 8  # b's output and a's output, still needed by c
    assert c.output_elements == 3


def test_values_made_from_shapes_alone_do_not_cross_a_boundary(profile_of) -> None:
    """A causal mask is a constant each IPU makes for itself: only what the input's values or
    the weights flow into crosses (GPT-2's 1024 x 1024 mask doubled its stage outputs)."""
    prof = profile_of(_target_="tests.models.factories.masked_net", input_shape=[8])
    a, b, _ = prof.block_stats
    assert a.output_elements == 8 + 64  # h and the mask of its values (8 x 8 per sample)
    assert b.output_elements == 8  # what b reads of them is read within b


def test_a_mask_built_under_vmap_is_traced(profile_of) -> None:
    """A torch function's output inside `torch.vmap` has no storage to follow: the model
    profiled, where it ended in "Cannot access storage of BatchedTensorImpl"."""
    prof = profile_of(_target_="tests.models.factories.vmap_mask_net", input_shape=[8])
    assert prof.parameters == 8 * 8 + 8


def test_peak_live_elements_of_the_mnist_first_block(profile_of) -> None:
    prof = profile_of(name="mnist_cnn", input_shape=[1, 28, 28], num_classes=10)
    # While the max-pool runs: the conv output (10x24x24) and the pooled values and indices
    # (2 x 10x12x12) are live; the image is dead after the conv.
    assert prof.block_stats[0].max_live_elements == 5760 + 2 * 1440
    # Saved for backward: image (conv), conv output and indices (pool), relu output.
    assert prof.block_stats[0].saved_elements == 784 + 5760 + 1440 + 1440


def test_blocks_partition_the_ops(profile_of) -> None:
    for fields in ({"name": "resnet101"}, {"name": "bert_base", "sequence_length": 32}):
        prof = profile_of(**fields)
        assert prof.block_stats[0].first_op == 0
        assert prof.block_stats[-1].last_op == len(prof.ops)
        for i, (b, nxt) in enumerate(zip(prof.block_stats, prof.block_stats[1:], strict=False)):
            assert b.last_op == nxt.first_op
            ops = prof.ops[b.first_op : b.last_op]
            assert all(op.block == i for op in ops)
            assert b.forward_flops == math.fsum(op.forward_flops for op in ops)
            assert b.parameters == sum(op.parameters for op in ops)
            assert b.saved_elements == sum(op.saved_elements for op in ops)
            assert b.max_live_elements >= max(op.output_elements for op in ops)
        assert all(op.kind in OP_KINDS for op in prof.ops)
        assert prof.ops[-1].name == "loss" and prof.ops[-1].kind == "loss"


def test_resnet_head_block_begins_at_avgpool(profile_of) -> None:
    prof = profile_of(**conf("resnet50"))
    head = prof.block_stats[-1]
    assert head.name == "fc"
    assert [op.name for op in prof.ops[head.first_op : head.last_op]] == ["avgpool", "fc", "loss"]
    assert prof.block_stats[-2].output_elements == 2048 * 7 * 7


def test_dataset_fields_and_defaults(profile_of) -> None:
    plain = profile_of(name="resnet18", input_shape=[3, 32, 32])
    assert plain.sample_bytes == 3 * 32 * 32
    assert plain.preprocess_s_per_sample is None
    assert plain.torch_version == torch.__version__
    custom = profile_of(
        name="resnet18",
        input_shape=[3, 32, 32],
        dataset={"name": "x", "sample_bytes": 5000, "preprocess_s_per_sample": 0.002},
    )
    assert (custom.sample_bytes, custom.preprocess_s_per_sample) == (5000, 0.002)


def test_profile_is_json_serialisable(profile_of) -> None:
    prof = profile_of(name="mnist_cnn", input_shape=[1, 28, 28])
    data = json.loads(json.dumps(prof.to_dict()))
    assert data["blocks"] == prof.blocks
    assert len(data["ops"]) == len(prof.ops)


@settings(max_examples=15, deadline=None)
@given(width=st.integers(1, 64))
def test_linear_costs_scale_with_width(width: int, profile_of) -> None:
    prof = profile_of(_target_=TINY_MLP, input_shape=[8], kwargs={"width": width})
    first, _, second, _ = prof.ops
    assert first.forward_flops == 2 * 8 * width
    assert second.forward_flops == 2 * width * 4
    # The first layer's input needs no gradient: only the weight gradient is computed.
    assert first.backward_flops == first.forward_flops
    assert second.backward_flops == 2 * second.forward_flops
    assert prof.parameters == 8 * width + width + width * 4 + 4
    assert prof.block_stats[0].output_elements == width


def test_meta_device_allocates_nothing(profile_of) -> None:
    # A model far larger than this machine's memory profiles in well under a second on meta.
    prof = profile_of(name="bert_base", sequence_length=128, kwargs={"vocab_size": 2_000_000_000})
    assert prof.parameters > 2_000_000_000 * 768


def test_fast_meta_kernels_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from ipu_tune.models import _aten
    from ipu_tune.models._build import compute as _compute

    cfg = model_cfg(name="resnet18", input_shape=[3, 32, 32])
    fast = _compute(cfg)
    monkeypatch.setattr(_aten, "FAST_META_KERNELS", False)
    assert _compute(cfg) == fast


@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last])
def test_fast_batch_norm_metadata_equals_torch(fmt: torch.memory_format) -> None:
    from ipu_tune.models._aten import FAST_META

    x = torch.empty(2, 4, 5, 5, device="meta").to(memory_format=fmt)
    w, b, rm, rv = (torch.empty(4, device="meta") for _ in range(4))
    fwd = torch.ops.aten.native_batch_norm.default
    args = (x, w, b, rm, rv, True, 0.1, 1e-5)
    bwd = torch.ops.aten.native_batch_norm_backward.default
    for func, call in (
        (fwd, args),
        (bwd, (torch.empty_like(x), x, w, rm, rv, w, w, True, 1e-5, [True, True, False])),
    ):
        ours, theirs = FAST_META[func](*call), func(*call)
        assert len(ours) == len(theirs)
        for a, t in zip(ours, theirs, strict=True):
            if t is None:
                assert a is None
            else:
                assert (a.shape, a.stride(), a.dtype) == (t.shape, t.stride(), t.dtype)
