"""Analytic IPU execution simulator (placeholder exports; filled in by the simulator work)."""

from ipu_tune.simulator._result import (
    MEMORY_CATEGORIES,
    TIME_PHASES,
    IpuMemory,
    SimResult,
    StageTime,
)

SIMULATOR_VERSION = "0.0.0"

__all__ = [
    "MEMORY_CATEGORIES",
    "SIMULATOR_VERSION",
    "TIME_PHASES",
    "IpuMemory",
    "SimResult",
    "StageTime",
    "simulate",
]


def simulate(profile, system, plan):  # type: ignore[no-untyped-def]
    raise NotImplementedError("simulator work in progress")
