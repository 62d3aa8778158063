"""Search-space files: every shipped preset loads, every bad file fails with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ipu_tune.config import CONF_DIR, SPACES_DIR
from ipu_tune.errors import IpuTuneError
from ipu_tune.search import DIRECTIONS, KNOBS, load_space, parse_space
from ipu_tune.search._space import space_names

PRESETS = ("throughput", "memory", "latency", "pareto", "fit")


def test_every_preset_names_a_loadable_space_and_known_objectives() -> None:
    assert set(PRESETS) <= {p.stem for p in (CONF_DIR / "search").glob("*.yaml")}
    for path in sorted((CONF_DIR / "search").glob("*.yaml")):
        preset = yaml.safe_load(path.read_text())
        space = load_space(preset["space"])
        assert space.knobs, path
        assert preset["objectives"] and all(o in DIRECTIONS for o in preset["objectives"])
    assert set(space_names()) == {p.stem for p in SPACES_DIR.glob("*.yaml")}


def test_shipped_spaces_parse_to_their_documented_shape() -> None:
    fit = load_space("fit")
    # The micro-batch is a memory knob of every training preset but latency's (capped at yours).
    assert fit.keep_global_batch and "workload.micro_batch_size" in fit.knobs
    assert "workload.micro_batch_size" in load_space("throughput").knobs
    assert "workload.micro_batch_size" not in load_space("latency").knobs
    assert load_space("latency").fixed == {"workload.mode": "infer"}
    assert load_space("memory").throughput_floor_ratio == 0.5
    assert "workload.micro_batch_size" in load_space("pareto").knobs
    ga = load_space("throughput").knobs["plan.gradient_accumulation"]
    assert (ga.low, ga.high, ga.log) == (1, 64, True)
    assert load_space("throughput").knobs["plan.io_tiles"].choices == (0, 32, 64, 128, 192)


def test_a_path_works_as_well_as_a_name(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("knobs:\n  plan.precision: {choices: ['16.16', 16.32]}\n")
    space = load_space(path)
    assert space.name == "mine" and space.knobs["plan.precision"].choices == ("16.16", "16.32")


def test_unknown_space_name_lists_the_presets() -> None:
    with pytest.raises(IpuTuneError, match=r"search.space='nope'.*throughput"):
        load_space("nope")


BAD_FILES = [
    ("", "empty"),
    ("knobs: [unclosed\n", "not valid YAML at line"),
    ("- plan.precision\n", "expected a mapping"),
    ("knobs: {}\n", "knobs: must be a non-empty mapping"),
    ("knobs:\n  plan.precision:\nextra: 1\n", "extra: unknown key"),
    ("knobs:\n  plan.warp_drive: {low: 1, high: 2}\n", "knobs.plan.warp_drive: unknown knob"),
    ("knobs:\n  plan.device_iterations: {low: 8, high: 2}\n",
     "knobs.plan.device_iterations: low=8 > high=2"),
    ("knobs:\n  plan.device_iterations: {low: 1}\n", "knobs.plan.device_iterations.high: missing"),
    ("knobs:\n  plan.device_iterations: {low: one, high: 2}\n",
     "knobs.plan.device_iterations.low: 'one' is not an integer"),
    ("knobs:\n  plan.device_iterations: {low: 0, high: 2}\n",
     "knobs.plan.device_iterations.low: 0: must be >= 1"),
    ("knobs:\n  plan.device_iterations: {low: 1, high: 8, step: 2, log: true}\n",
     "step and log cannot be combined"),
    ("knobs:\n  plan.device_iterations: {low: 1, high: 8, steps: 2}\n",
     "knobs.plan.device_iterations.steps: unknown"),
    ("knobs:\n  plan.gradient_accumulation:\n", "needs a range"),
    ("knobs:\n  plan.available_memory_proportion: {low: 0.1, high: 1.5}\n",
     "available_memory_proportion.high: 1.5: must be <= 1"),
    # An integer limit in full: `:g` printed 2^20 as 1.04858e+06.
    ("knobs:\n  plan.gradient_accumulation: {low: 1, high: 100000000000}\n",
     "knobs.plan.gradient_accumulation.high: 100000000000: must be <= 1,048,576"),
    ("knobs:\n  plan.available_memory_proportion: {low: 0.1, high: 0.9, step: 0}\n",
     "step: 0: must be > 0"),
    # Optuna's Decimal arithmetic on the range failed (DivisionImpossible) at the first draw.
    ("knobs:\n  plan.available_memory_proportion: {low: 0.1, high: 0.9, step: 1e-300}\n",
     "step: 1e-300: more than 1,000,000 steps from low to high; allowed: a step >= (high - "
     "low) / 1,000,000"),
    ("knobs:\n  plan.device_iterations: {low: 1, high: 1" + "0" * 400 + "}\n",
     "knobs.plan.device_iterations.high: 1000"),
    ("knobs:\n  plan.precision: {choices: []}\n", "choices: must be a non-empty list"),
    ("knobs:\n  plan.precision: {choices: ['8.8']}\n", "knobs.plan.precision.choices: '8.8'"),
    ("knobs:\n  plan.precision: {low: 1, high: 2}\n", "takes choices"),
    ("knobs:\n  plan.io_tiles: {choices: [0, 33]}\n", "plan.io_tiles.choices: 33"),
    ("knobs:\n  plan.eight_bit_io: {choices: [1]}\n", "plan.eight_bit_io.choices: 1"),
    ("knobs:\n  plan.replication_factor: {choices: [3]}\n", "must be a power of two"),
    ("knobs:\n  plan.recompute: {choices: [none, none]}\n", "duplicates"),
    ("knobs:\n  plan.pipeline.splits: {step: 0}\n", "plan.pipeline.splits.step: 0"),
    ("knobs:\n  plan.pipeline.splits: {low: 1, high: 3}\n", "takes only `step`"),
    ("knobs:\n  plan.precision: {choices: ['16.16'], low: 1}\n", "either choices or a range"),
    ("knobs:\n  plan.precision: '16.16'\n", "expected a mapping"),
    ("knobs:\n  plan.precision:\nfixed: {plan.precision: '16.16'}\n", "is also a searched knob"),
    ("knobs:\n  plan.precision:\nfixed: {model.name: resnet18}\n", "fixed.model.name: unknown"),
    ("knobs:\n  plan.precision:\nconstraints: {min_fun: 1}\n", "constraints.min_fun: unknown"),
    ("knobs:\n  plan.precision:\nconstraints: {keep_global_batch: 1}\n",
     "keep_global_batch: 1: must be true or false"),
    ("knobs:\n  plan.precision:\nconstraints: {throughput_floor_ratio: 2}\n",
     "throughput_floor_ratio: 2.0: must be in (0, 1]"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_FILES, ids=[e for _, e in BAD_FILES])
def test_bad_space_files_fail_with_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(IpuTuneError) as info:
        load_space(path)
    message = str(info.value)
    assert str(path) in message
    assert expected in message
    assert "\n" not in message


def test_space_files_are_loaded_safely(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(f"knobs: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(IpuTuneError, match=r"not valid YAML"):
        load_space(path)
    assert not marker.exists()


def test_a_number_yaml_1_1_reads_as_text_is_a_number(tmp_path: Path) -> None:
    """`1e-2` has no dot: YAML 1.1 reads it as text ("'1e-2' is not a number"); Hydra's loader
    reads it as the number it is, and so does the space file's."""
    path = tmp_path / "s.yaml"
    path.write_text("knobs:\n  plan.available_memory_proportion: {low: 1e-1, high: 1, step: "
                    "5e-2}\n")
    spec = load_space(path).knobs["plan.available_memory_proportion"]
    assert (spec.low, spec.high, spec.step) == (0.1, 1.0, 0.05)


def test_null_spec_takes_the_natural_domain() -> None:
    space = parse_space({"knobs": {k: None for k, (_, dom, _) in KNOBS.items() if dom is not None}})
    assert space.knobs["plan.precision"].choices == ("32.32", "16.32", "16.16")
    assert space.knobs["plan.offload_optimizer_state"].choices == (False, True)
    assert space.knobs["plan.replication_factor"].choices == ()  # resolved per system


def test_a_knob_can_be_searched_in_some_workload_modes_only(tmp_path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("knobs:\n  plan.partials: {modes: [infer]}\n"
                    "  plan.gradient_accumulation: {low: 1, high: 8, modes: [train, infer]}\n")
    space = load_space(str(path))
    partials, ga = space.knobs["plan.partials"], space.knobs["plan.gradient_accumulation"]
    assert partials.choices == ("float", "half") and partials.modes == ("infer",)
    assert partials.searched_in("infer") and not partials.searched_in("train")
    assert (ga.low, ga.high) == (1, 8) and ga.searched_in("train")


@pytest.mark.parametrize("modes", ["infer", "[]", "[serve]", "[infer, infer]", "{a: 1}"])
def test_modes_must_be_a_list_of_distinct_workload_modes(tmp_path, modes: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"knobs:\n  plan.partials: {{modes: {modes}}}\n")
    with pytest.raises(IpuTuneError, match=r"knobs\.plan\.partials\.modes: .*distinct modes of "
                                           "train, infer"):
        load_space(str(path))
