"""Plans and a helper shared by the simulator tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ipu_tune.hardware import System
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import SimResult, simulate

# The seed tutorial's plan (ResNet-101, 64x64, 2 Mk2 IPUs, split at layer3.8), fp16, GA 8, DI 4.
SEED_PLAN = ExecutionPlan(
    micro_batch_size=64,
    optimizer="adamw",
    precision="16.16",
    gradient_accumulation=8,
    device_iterations=4,
    splits=("layer3.8",),
    recompute="checkpoints",
)


def run(profile: ModelProfile, system: System, base: ExecutionPlan = SEED_PLAN,
        **changes: Any) -> SimResult:
    """Simulate `base` with `changes` applied."""
    return simulate(profile, system, replace(base, **changes))


def ipu_bytes(result: SimResult, ipu: int, *categories: str) -> int:
    cats = result.memory[ipu].categories
    return sum(cats[c] for c in categories) if categories else result.memory[ipu].total_bytes


def matmul_profile(m: int, k: int, n: int, blocks: int = 1, norm: bool = False,
                   rhs: float = 0.0) -> ModelProfile:
    """A synthetic chain of `blocks` blocks, each one matmul (m x k by k x n per sample), and
    optionally a norm on its output: small profiles with exactly known costs. `rhs` > 0: the
    second operand is no weight but `rhs` K x N activations per sample (attention's keys)."""
    from ipu_tune.models import BlockProfile, OpProfile

    ops: list[OpProfile] = []
    stats: list[BlockProfile] = []
    for b in range(blocks):
        first = len(ops)
        ops.append(OpProfile(
            name=f"block{b}.mm", kind="matmul", block=b, forward_flops=2.0 * m * k * n,
            backward_flops=4.0 * m * k * n, parameters=0 if rhs else k * n,
            output_elements=m * n, saved_elements=m * k, m_per_sample=m, k=k, n=n,
            rhs_per_sample=rhs,
        ))
        if norm:
            ops.append(OpProfile(
                name=f"block{b}.norm", kind="norm", block=b, forward_flops=0.0,
                backward_flops=0.0, parameters=2 * n, output_elements=m * n,
                saved_elements=m * n,
            ))
        stats.append(BlockProfile(
            name=f"block{b}", first_op=first, last_op=len(ops),
            forward_flops=sum(o.forward_flops for o in ops[first:]),
            backward_flops=sum(o.backward_flops for o in ops[first:]),
            parameters=sum(o.parameters for o in ops[first:]), output_elements=m * n,
            saved_elements=sum(o.saved_elements for o in ops[first:]), max_live_elements=2 * m * n,
        ))
    return ModelProfile(
        name="synthetic", input_shape=(m, k), num_classes=n, input_kind="tokens",
        ops=tuple(ops), block_stats=tuple(stats), preprocess_s_per_sample=0.0,
    )
