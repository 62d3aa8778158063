"""Dataclass schema of the configuration file (DESIGN.md *Configuration file*, Contract).

These are Hydra structured configs: mutable, OmegaConf-typed (``Optional``/``List``/``Dict``).
Defaults here are the documented defaults of `ipu_tune.evaluate`: PopTorch's own defaults for
every plan knob, and the seed tutorial's model (ResNet-101, CIFAR-10 at 64x64, 10 classes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional  # noqa: UP035  (OmegaConf needs typing generics)

IPUS = ("mk1", "mk2", "bow", "c600")


# The dataset name meaning no host data pipeline: samples generated on the device or already in
# host memory (Graphcore's synthetic-data benchmarks), so no load/augment cost whatever
# `preprocess_s_per_sample` says; with 8-bit I/O no host conversion either. The input still
# crosses the host link each step.
SYNTHETIC = "synthetic"


@dataclass
class DatasetConfig:
    """What the host feeds: one stored sample and its preprocessing (`name: synthetic`: none)."""

    name: str = "cifar10"
    # Bytes of one stored sample read by the host before preprocessing (uint8 pixels, token ids).
    sample_bytes: Optional[int] = None  # noqa: UP045
    # Host seconds to load and augment one sample on one worker (decode, flip, resize); None takes
    # the calibrated default of the host preset.
    preprocess_s_per_sample: Optional[float] = None  # noqa: UP045


@dataclass
class ModelConfig:
    name: Optional[str] = "resnet101"  # noqa: UP045
    # Dotted path of a factory returning torch.nn.Module; replaces `name` when set.
    _target_: Optional[str] = None  # noqa: UP045
    input_shape: List[int] = field(default_factory=lambda: [3, 64, 64])  # noqa: UP006
    num_classes: int = 10
    sequence_length: Optional[int] = None  # noqa: UP045
    # Keyword arguments for the factory (zoo builders or `_target_`).
    kwargs: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006
    dataset: DatasetConfig = field(default_factory=DatasetConfig)


# WorkloadConfig, PipelineConfig and PlanConfig spell out the knobs of `ipu_tune.knobs` (names,
# types, defaults) so that Hydra and mypy see typed fields; tests/config/test_knobs.py checks
# they match the declarations.
@dataclass
class WorkloadConfig:
    mode: str = "train"
    micro_batch_size: int = 64
    optimizer: str = "adamw"


@dataclass
class HostConfig:
    """One host server; None takes the preset (`ipu_tune.hardware.HOST`)."""

    cpu_cores: Optional[int] = None  # noqa: UP045
    network_bytes_per_s: Optional[float] = None  # noqa: UP045  (server to its IPU-Machines)


@dataclass
class SystemConfig:
    ipu: str = "mk2"
    num_ipus: int = 1
    hosts: int = 1  # host servers
    host: HostConfig = field(default_factory=HostConfig)


@dataclass
class PipelineConfig:
    splits: List[str] = field(default_factory=list)  # noqa: UP006
    schedule: str = "grouped"


@dataclass
class PlanConfig:
    precision: str = "32.32"
    gradient_accumulation: int = 1
    device_iterations: int = 1
    replication_factor: int = 1
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    recompute: str = "auto"
    available_memory_proportion: float = 0.6
    offload_optimizer_state: bool = False
    replicated_tensor_sharding: bool = False
    prefetch_depth: int = 1
    io_tiles: int = 0
    eight_bit_io: bool = False
    async_dataloader: bool = False
    dataloader_workers: int = 1
    host_instances: int = 1
    partials: str = "float"


@dataclass
class EvalConfig:
    """The contract schema: one plan of one model on one system."""

    model: ModelConfig = field(default_factory=ModelConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    system: SystemConfig = field(default_factory=SystemConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)


@dataclass
class SearchConfig:
    """A search preset (conf/search/*.yaml) naming its space in search_spaces/."""

    name: str = "throughput"
    space: str = "throughput"
    # throughput | memory | memory_headroom | latency | changes
    objectives: List[str] = field(default_factory=lambda: ["throughput"])  # noqa: UP006
    throughput_floor: Optional[float] = None  # noqa: UP045
    warm_start: bool = True
    # Fix micro_batch_size x gradient_accumulation x replication_factor.
    global_batch_size: Optional[int] = None  # noqa: UP045


@dataclass
class SamplerConfig:
    name: str = "tpe"
    seed: Optional[int] = 0  # noqa: UP045
    params: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class StudyConfig:
    name: Optional[str] = None  # noqa: UP045
    # Optuna storage URL; None means the journal file `<results_dir>/ipu_tune.journal`.
    storage: Optional[str] = None  # noqa: UP045
    # Total finished trials the study should reach (not "n more").
    n_trials: int = 100
    # Worker processes on this machine sharing the storage (more machines: run the same command).
    workers: int = 1
    timeout_s: Optional[float] = None  # noqa: UP045
    progress_bar: bool = True


@dataclass
class TuneConfig(EvalConfig):
    search: SearchConfig = field(default_factory=SearchConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    study: StudyConfig = field(default_factory=StudyConfig)
    results_dir: str = "results"
