"""Properties over random valid plans of ResNet-50 (224x224) and ResNet-101 (64x64)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipu_tune.hardware import System, make_system
from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan
from ipu_tune.simulator import SimResult, simulate

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def cases(draw: st.DrawFn, profiles: tuple[ModelProfile, ...]) -> tuple[
        ModelProfile, System, ExecutionPlan]:
    profile = draw(st.sampled_from(profiles))
    stages = draw(st.sampled_from([1, 2, 4]))
    replicas = draw(st.sampled_from([1, 2, 4]))
    names = profile.blocks
    starts = sorted(draw(st.lists(st.integers(1, len(names) - 1), min_size=stages - 1,
                                  max_size=stages - 1, unique=True)))
    train = draw(st.booleans())
    io = draw(st.sampled_from([0, 32, 64, 128, 192]))
    plan = ExecutionPlan(
        mode="train" if train else "infer",
        micro_batch_size=draw(st.sampled_from([1, 4, 16, 32, 64])),
        optimizer=draw(st.sampled_from(["sgd", "momentum", "adam", "adamw", "lamb"])),
        precision=draw(st.sampled_from(["32.32", "16.32", "16.16"])),
        gradient_accumulation=draw(st.integers(1, 64)) if train else 1,
        device_iterations=draw(st.integers(1, 64)),
        replication_factor=replicas,
        splits=tuple(names[i] for i in starts),
        schedule=draw(st.sampled_from(["grouped", "interleaved", "sharded"])),
        recompute=draw(st.sampled_from(["none", "checkpoints", "every_block"])),
        available_memory_proportion=draw(st.floats(0.05, 1.0)),
        offload_optimizer_state=draw(st.booleans()),
        replicated_tensor_sharding=replicas > 1 and draw(st.booleans()),
        prefetch_depth=draw(st.integers(1, 5)),
        io_tiles=io,
        eight_bit_io=draw(st.booleans()),
        async_dataloader=draw(st.booleans()),
        dataloader_workers=draw(st.integers(1, 64)),
    )
    ipus = stages * replicas
    system = make_system("mk2", ipus, hosts=draw(st.integers(1, ipus)))
    return profile, system, plan


def _finite(r: SimResult) -> None:
    numbers = [r.throughput, r.step_time_s, r.device_throughput, *r.phases.values()]
    for s in r.stages:
        numbers += [s.forward_s, s.backward_s, s.recompute_s, s.inter_ipu_s]
    assert all(math.isfinite(x) and x >= 0 for x in numbers), numbers
    assert all(v >= 0 for m in r.memory for v in m.categories.values())
    assert r.step_time_s > 0
    assert sum(r.phases.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert (r.throughput > 0) == r.fits


def _memory(r: SimResult) -> list[tuple[int, int]]:
    return [(m.total_bytes, m.max_tile_bytes) for m in r.memory]


def _le(a: SimResult, b: SimResult) -> bool:
    return all(ta <= tb and xa <= xb for (ta, xa), (tb, xb) in zip(_memory(a), _memory(b),
                                                                      strict=True))


def test_properties(resnet50: ModelProfile, resnet101: ModelProfile) -> None:
    profiles = (resnet50, resnet101)

    @SETTINGS
    @given(cases(profiles))
    def check(case: tuple[ModelProfile, System, ExecutionPlan]) -> None:
        profile, system, plan = case
        r = simulate(profile, system, plan)
        _finite(r)
        assert len(r.memory) == len(r.stages) == plan.stages

        # fp16 never needs more memory than fp32 (model and input precision).
        fp32 = simulate(profile, system, replace(plan, precision="32.32"))
        mixed = simulate(profile, system, replace(plan, precision="16.32"))
        half = simulate(profile, system, replace(plan, precision="16.16"))
        assert _le(half, fp32) and _le(mixed, fp32)

        # Offloading or sharding optimizer state never adds on-chip memory.
        on_chip = replace(plan, offload_optimizer_state=False, replicated_tensor_sharding=False)
        base = simulate(profile, system, on_chip)
        assert _le(simulate(profile, system, replace(on_chip, offload_optimizer_state=True)), base)
        if plan.replication_factor > 1:
            rts = replace(on_chip, replicated_tensor_sharding=True)
            assert _le(simulate(profile, system, rts), base)

        # More device iterations never lower throughput.
        more_di = replace(plan, device_iterations=plan.device_iterations * 2)
        more = simulate(profile, system, more_di)
        assert more.throughput >= r.throughput * (1 - 1e-12)
        assert more.device_throughput >= r.device_throughput * (1 - 1e-12)

    check()


def test_stash_never_shrinks_when_the_pipeline_deepens(resnet50: ModelProfile,
                                                       resnet101: ModelProfile) -> None:
    @SETTINGS
    @given(st.sampled_from((resnet50, resnet101)), st.data())
    def check(profile: ModelProfile, data: st.DataObject) -> None:
        names = profile.blocks
        n = data.draw(st.integers(1, 3))
        starts = sorted(data.draw(st.lists(st.integers(1, len(names) - 3), min_size=n - 1,
                                           max_size=n - 1, unique=True)))
        last = starts[-1] if starts else 0
        extra = data.draw(st.integers(last + 1, len(names) - 1))
        plan = ExecutionPlan(
            micro_batch_size=data.draw(st.sampled_from([4, 16, 64])),
            precision=data.draw(st.sampled_from(["32.32", "16.16"])),
            gradient_accumulation=16,
            splits=tuple(names[i] for i in starts),
            schedule=data.draw(st.sampled_from(["grouped", "interleaved", "sharded"])),
            recompute=data.draw(st.sampled_from(["none", "checkpoints", "every_block"])),
        )
        deeper = replace(plan, splits=(*plan.splits, names[extra]))
        a = simulate(profile, make_system("mk2", n), plan)
        b = simulate(profile, make_system("mk2", n + 1), deeper)
        kept = ("activation_stash", "recompute_checkpoints")
        for s in range(n - 1):  # stages whose blocks did not change
            assert sum(b.memory[s].categories[c] for c in kept) >= sum(
                a.memory[s].categories[c] for c in kept)

    check()
