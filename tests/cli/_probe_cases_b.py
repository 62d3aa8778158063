"""Bad input found by a second probe from outside (run by tests/cli/test_bad_input.py with its
other cases): before, each was a traceback, a message naming no value, or a value read as
something else (`1:30` as 90)."""

from __future__ import annotations

from pathlib import Path

_RUN = ["model=mnist_cnn", "study.n_trials=12", "study.progress_bar=false"]
_HUGE = "an integer of more than 4300 digits; allowed: integers of at most 4300 digits"
_BASE60 = "YAML 1.1 reads a:b as a number in base 60 (1:30 is 90); allowed: quote it"
_ALREADY = ("+sampler.params.n_startup_trials={v}: sampler.params.n_startup_trials is already "
            "set (by its preset or a config file) and + only adds a key; allowed: drop the +")

# (id, arguments, text the one-line message must contain). `{tmp}`: the test's folder.
PROBE_B_CASES: list[tuple[str, list[str], str]] = [
    # Sampler arguments Optuna checks late or never: a traceback after the startup trials had
    # been stored (the snapshot of the test: now nothing is written).
    ("sampler gamma from a config", [*_RUN, "+sampler.params.gamma=x"],
     "sampler.params.gamma='x': a TPESampler argument a config cannot give"),
    ("sampler prior weight below 0", [*_RUN, "+sampler.params.prior_weight=-1"],
     "sampler.params.prior_weight=-1: allowed: a finite number > 0 and <= 1000"),
    ("sampler prior weight nan", [*_RUN, "+sampler.params.prior_weight=nan"],
     "sampler.params.prior_weight=nan: allowed: a finite number"),
    ("sampler of 10^11 candidates", [*_RUN, "sampler.params.n_ei_candidates=99999999999"],
     "sampler.params.n_ei_candidates=99999999999: allowed: an integer in 1..10,000"),
    ("cmaes sigma nan", [*_RUN, "sampler=cmaes", "+sampler.params.sigma0=nan"],
     "sampler.params.sigma0=nan: allowed: a finite number > 0 and <= 1"),
    ("cmaes population 0", [*_RUN, "sampler=cmaes", "+sampler.params.popsize=0"],
     "sampler.params.popsize=0: allowed: an integer in 2..10,000"),
    # Hydra's "Could not append to config. An item is already at ..." named no value.
    ("add a sampler argument its preset sets", [*_RUN, "+sampler.params.n_startup_trials=-5"],
     _ALREADY.format(v=-5)),
    ("add a gp argument its preset sets", [*_RUN, "sampler=gp",
                                           "+sampler.params.n_startup_trials=-1"],
     _ALREADY.format(v=-1)),
    ("gp startup trials below 0", [*_RUN, "sampler=gp", "sampler.params.n_startup_trials=-1"],
     "sampler.params.n_startup_trials=-1: allowed: an integer in 0..1,000,000"),
    # Integers of 0x/0b/octal digits read past Python's 4300-digit limit, then crashed where
    # a message printed them; `1:30` was read as 90 (YAML 1.1's base 60).
    ("evaluate a 0x integer of 4000 digits", ["evaluate", "{tmp}/hex_int.yaml"],
     "workload.micro_batch_size='0xffff"),
    ("evaluate a 0x integer of 4000 digits: why", ["evaluate", "{tmp}/hex_int.yaml"], _HUGE),
    ("evaluate a 0b integer of 15000 digits", ["evaluate", "{tmp}/bin_int.yaml"], _HUGE),
    ("evaluate an octal integer of 5000 digits", ["evaluate", "{tmp}/oct_int.yaml"], _HUGE),
    ("evaluate base 60 of 3000 parts", ["evaluate", "{tmp}/base60_long.yaml"], _BASE60),
    ("evaluate 1:30", ["evaluate", "{tmp}/base60.yaml"],
     f"config file '{{tmp}}/base60.yaml': workload.micro_batch_size='1:30': {_BASE60}"),
    ("evaluate a base-60 float", ["evaluate", "{tmp}/base60_float.yaml"], _BASE60),
    ("profile a 0x kwarg of 4000 digits", ["profile", "mnist_cnn", "--kwarg",
                                           "x=0x" + "f" * 4000], _HUGE),
    ("profile a base-60 kwarg", ["profile", "mnist_cnn", "--kwarg", "x=1:30"], _BASE60),
    ("experiment 0x integer of 4000 digits", [*_RUN, "--config-dir", "{tmp}/yaml11_hex",
                                              "+experiment=hex"],
     "config file '{tmp}/yaml11_hex/experiment/hex.yaml': workload.micro_batch_size='0xfff"),
    ("experiment 1:30", [*_RUN, "--config-dir", "{tmp}/yaml11_base60", "+experiment=base60"],
     f"workload.micro_batch_size='1:30': {_BASE60}"),
    # A date named neither the value nor what the key takes ("Value 'date' is not a
    # supported primitive type"); it is text now, as Hydra's loader reads it.
    ("evaluate a date", ["evaluate", "{tmp}/date.yaml"],
     "workload.micro_batch_size='2001-12-14': allowed: an integer"),
    ("experiment a date", [*_RUN, "--config-dir", "{tmp}/yaml11_date", "+experiment=date"],
     "experiment/date: workload.micro_batch_size='2001-12-14': allowed: an integer"),
    ("evaluate bytes", ["evaluate", "{tmp}/binary_tag.yaml"],
     "workload.micro_batch_size='aGVsbG8=': the tag !!binary makes a binary value"),
    # A defaults list leading back to its own file: Hydra's RecursionError traceback.
    ("experiment including itself", [*_RUN, "--config-dir", "{tmp}/loop1", "+experiment=e"],
     "config file '{tmp}/loop1/experiment/e.yaml': defaults: experiment/e -> experiment/e "
     "leads back to itself"),
    ("experiment and model including each other", [*_RUN, "--config-dir", "{tmp}/loop2",
                                                   "+experiment=e"],
     "defaults: experiment/e -> model/m -> experiment/e leads back to itself"),
    # YAML 1.1 reads 1e-300 (no dot) as text: "'1e-300' is not a number". Read as Hydra reads
    # it, a number; this one is too small a step to search.
    ("space step 1e-300", [*_RUN, "search.space={tmp}/tiny_step.yaml"],
     "knobs.plan.available_memory_proportion.step: 1e-300: more than 1,000,000 steps from low "
     "to high"),
    # An ipu_config.json's error started with the file, not the key it was named by.
    ("ipu_config.json a bad field", ["model=gpt2", "plan.from_ipu_config={tmp}/rf0.json"],
     "plan.from_ipu_config='{tmp}/rf0.json': replication_factor=0: must be in 1..1024"),
]


def write_probe_b_fixtures(tmp: Path) -> None:
    """The files the cases above read."""
    mbs = "workload: {{micro_batch_size: {}}}\n"
    (tmp / "hex_int.yaml").write_text(mbs.format("0x" + "f" * 4000))
    (tmp / "bin_int.yaml").write_text(mbs.format("0b" + "1" * 15000))
    (tmp / "oct_int.yaml").write_text(mbs.format("0" + "7" * 5000))
    (tmp / "base60_long.yaml").write_text(mbs.format(":".join(["59"] * 3000)))
    (tmp / "base60.yaml").write_text(mbs.format("1:30"))
    (tmp / "base60_float.yaml").write_text(mbs.format("1:30.5"))
    (tmp / "date.yaml").write_text(mbs.format("2001-12-14"))
    (tmp / "binary_tag.yaml").write_text(mbs.format("!!binary aGVsbG8="))
    # A folder each: every file of a --config-dir is read before Hydra runs.
    for name, value in (("hex", "0x" + "f" * 4000), ("base60", "1:30"), ("date", "2001-12-14")):
        exp = tmp / f"yaml11_{name}" / "experiment"
        exp.mkdir(parents=True)
        (exp / f"{name}.yaml").write_text("# @package _global_\n" + mbs.format(value))
    (tmp / "loop1" / "experiment").mkdir(parents=True)
    (tmp / "loop1" / "experiment" / "e.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /experiment/e\nworkload: {micro_batch_size: 8}\n")
    for folder in ("experiment", "model"):
        (tmp / "loop2" / folder).mkdir(parents=True)
    (tmp / "loop2" / "experiment" / "e.yaml").write_text(
        "# @package _global_\ndefaults:\n  - /model: m\n")
    (tmp / "loop2" / "model" / "m.yaml").write_text(
        "defaults:\n  - mnist_cnn\n  - /experiment@_global_: e\n")
    (tmp / "tiny_step.yaml").write_text(
        "knobs:\n  plan.available_memory_proportion: {low: 0.1, high: 1.0, step: 1e-300}\n")
    (tmp / "rf0.json").write_text('{"replication_factor": 0}')
