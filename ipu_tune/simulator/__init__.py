"""Analytic IPU execution simulator: memory per IPU and tile, time per step by phase.

`simulate(profile, system, plan)` is pure (frozen dataclasses in, a frozen `SimResult` out; no
I/O, logging or randomness). Its free constants are fitted to measured runs
by `ipu_tune.calibration` (a client of this package) and kept in `DEFAULT_CONSTANTS`; pass
`constants=` to apply a refitted set (`python -m ipu_tune calibrate`, `constants_from_mapping`).
"""

from ipu_tune.simulator._collectives import (
    ALL_REDUCE_TERM_PARTS,
    ALL_REDUCE_TERMS,
    ReplicaLayout,
    replica_layout,
)
from ipu_tune.simulator._compute import block_costs
from ipu_tune.simulator._constants import (
    DEFAULT_CONSTANTS,
    FITTED,
    OPTIMIZER_STATE,
    REFITTABLE,
    SimConstants,
    constants_from_mapping,
    state_bytes_per_param,
)
from ipu_tune.simulator._memory import recompute_mode, stash_depth
from ipu_tune.simulator._result import (
    MEMORY_CATEGORIES,
    TIME_PHASES,
    IpuMemory,
    SimResult,
    StageTime,
    fullest,
    host_wait_clause,
)
from ipu_tune.simulator._simulate import simulate
from ipu_tune.simulator._stages import HeadPlacement, head_placement

# Bump when the physics or the constants change (results stores keep it with each trial).
SIMULATOR_VERSION = "3.11.0"

__all__ = [
    "ALL_REDUCE_TERMS",
    "ALL_REDUCE_TERM_PARTS",
    "DEFAULT_CONSTANTS",
    "FITTED",
    "MEMORY_CATEGORIES",
    "OPTIMIZER_STATE",
    "REFITTABLE",
    "SIMULATOR_VERSION",
    "TIME_PHASES",
    "HeadPlacement",
    "IpuMemory",
    "ReplicaLayout",
    "SimConstants",
    "SimResult",
    "StageTime",
    "block_costs",
    "constants_from_mapping",
    "fullest",
    "head_placement",
    "host_wait_clause",
    "recompute_mode",
    "replica_layout",
    "simulate",
    "stash_depth",
    "state_bytes_per_param",
]
