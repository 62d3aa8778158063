"""What a plan knob may need to have any effect (`ipu_tune.knobs.Knob.needs`).

The needs are declared here, each with the keys that decide it and the test of their values;
`ipu_tune.knobs.moot_keys`, the one place a knob is judged moot, reads them. This module
imports nothing of ipu_tune (as `ipu_tune.knobs`, which re-exports its names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["GENERATED", "INPUT_KIND", "NEEDS", "PROFILE_KEYS", "SYNTHETIC", "VOCABULARY",
           "ModelFacts", "Need"]

# `model.dataset.name` of data made on the IPU (PopTorch `Options.enableSyntheticData`): no
# host pipeline and no stream. `ipu_tune.config` lists the dataset names.
SYNTHETIC = "synthetic"
# `model.dataset.name` of random samples made in host memory in the stream's type: streamed
# to the IPU as real data is, but made by no data pipeline (no load, augmentation or cast).
GENERATED = "generated"

# The profile's facts among the keys a need is decided by: not config keys, `moot_keys` is
# given them (`ModelFacts`).
INPUT_KIND = "profile.input_kind"
VOCABULARY = "profile.vocabulary"
PROFILE_KEYS = (INPUT_KIND, VOCABULARY)


@dataclass(frozen=True)
class ModelFacts:
    """What a need reads of the model profile (`ModelProfile.facts`); None: not known, which
    never makes a knob moot."""

    input_kind: str | None = None  # image | tokens | audio (`ModelProfile.input_kind`)
    vocabulary: bool | None = None  # a vocabulary head (`ModelProfile.vocabulary_ops`)

    def value(self, key: str) -> str | bool | None:
        """The fact a need's pseudo-key (`INPUT_KIND`, `VOCABULARY`) names."""
        return self.input_kind if key == INPUT_KIND else self.vocabulary


@dataclass(frozen=True)
class Need:
    """What a knob may need to have any effect on a plan (`Knob.needs`, a name of `NEEDS`)."""

    text: str  # what the plan must have, as the exports' comments say it
    keys: tuple[str, ...]  # the keys whose values decide it (`INPUT_KIND`: the profile's)
    # Whether the plan lacks it, from those values in order (None: not known; never lacking).
    lacking: Callable[..., bool]


# A plan lacking one of a knob's needs does not run the knob, which is then moot: validated
# and kept at its value, but never searched, shown in plan lines, reports or trial tables,
# compared, counted as a change or set by the exported programs (`moot_keys`, the one place
# the rule is decided). Each is what the simulator reads (docs/search.md, "Moot knobs").
NEEDS: Mapping[str, Need] = {
    # Inference runs no backward pass, weight update or optimizer (`_collectives`, `_memory`).
    "training": Need("a training plan", ("workload.mode",), lambda mode: mode == "infer"),
    # 8-bit I/O sends pixels as uint8; token ids and audio floats have no 8-bit form (`_host`).
    "pixels": Need("pixel input", (INPUT_KIND,), lambda kind: kind not in (None, "image")),
    # Synthetic data is made on the IPU: no stream copies, buffers or transfers (`_host`).
    "stream": Need("inputs streamed from the host", ("model.dataset.name",),
                   lambda dataset: dataset == SYNTHETIC),
    # Synthetic and generated inputs have no host data pipeline: no loader, workers or
    # per-instance pipelines (`_host.host_seconds_per_sample` is 0).
    "loader": Need("a host data pipeline", ("model.dataset.name",),
                   lambda dataset: dataset in (SYNTHETIC, GENERATED)),
    # A language model's output head maps the width back to its token input's vocabulary
    # (`ModelProfile.vocabulary_ops`, `_compute`): a classifier or a base model has none, and
    # optimum-graphcore's models of audio input do not slice one.
    "vocabulary": Need("token input and a vocabulary head", (INPUT_KIND, VOCABULARY),
                       lambda kind, head: kind not in (None, "tokens") or head is False),
    # One stage runs the same whatever the schedule (`_pipeline`, `_memory.stash_depth`).
    "pipelined": Need("two or more pipeline stages", ("plan.pipeline.splits",),
                      lambda splits: splits is not None and len(splits) == 0),
    # One replica has nothing to shard (`_collectives`).
    "replicated": Need("two or more replicas", ("plan.replication_factor",),
                       lambda replicas: replicas is not None and replicas < 2),
    # Partials of fp32 arithmetic are fp32 whatever the type (`_compute`: half partials need
    # an fp16 model, precision x.16).
    "half_model": Need("an fp16 model", ("plan.precision",),
                       lambda precision: precision is not None
                       and not str(precision).endswith(".16")),
    # A per-IPU proportion list runs on its IPUs in place of the one proportion
    # (`ExecutionPlan.stage_memory_proportions`).
    "one_proportion": Need(
        "no per-IPU proportions",
        ("plan.available_memory_proportion_per_ipu", "plan.pipeline.splits"),
        lambda per_ipu, splits: (splits is not None and bool(per_ipu)
                                 and len(per_ipu) == len(splits) + 1)),
}
