"""The closest trial of a study where no plan meets its constraints: the smallest total
violation over every constraint, not the memory excess alone."""

from __future__ import annotations

import optuna

from ipu_tune.explain import closest_trial
from ipu_tune.records import TrialRecord

_NAMES = ("memory", "throughput_floor")


def _pruned(study: optuna.Study, constraints: list[float]) -> int:
    trial = study.ask()
    TrialRecord.write_constraints(trial, _NAMES, constraints)
    TrialRecord.write_plan(trial, {"model": {"name": "mnist_cnn"}}, {"step_time_s": 1.0})
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    return trial.number


def test_the_closest_trial_misses_its_constraints_by_the_least_in_total() -> None:
    study = optuna.create_study()
    _pruned(study, [-0.2, 0.9])  # fits in memory, far below the floor
    near = _pruned(study, [0.02, 0.01])  # 2% over the memory, 1% below the floor
    _pruned(study, [0.001, 0.5])  # nearest in memory alone
    found = closest_trial(study)
    assert found is not None and found[0] == near


def test_a_closest_plan_over_only_by_a_tile_is_said_to_overflow_memory() -> None:
    """Within the IPU's SRAM in total but over on its most-loaded tile: it does not fit in
    memory, so it was said to 'fit in memory' and to miss 'another constraint', and its memory
    remedies were dropped."""
    from ipu_tune.cli.explain_cmd import format_remedies
    from ipu_tune.explain import Closest

    row = {"remedy": "available memory proportion 0.6 -> 0.1", "fits": True,
           "throughput": 900.0, "memory": "700/941 MB",
           "overrides": ["plan.available_memory_proportion=0.1"]}
    closest = Closest(trial=4, reason="IPU0 (stage 0): the most-loaded tile needs 700.0 kB",
                      peak_memory_bytes=900_000_000, memory_limit_bytes=940_572_672,
                      excess_bytes=0, remedies=(row,), overflows=True)
    assert closest.headline == "no plan fits: every trial overflows the IPU's memory"
    assert closest.describe() == ("trial 4, peak 900 MB of 941 MB per IPU, but a tile "
                                  "overflows: IPU0 (stage 0): the most-loaded tile needs 700.0 kB")
    lines = format_remedies(closest, [])
    assert lines[2].startswith("  - available memory proportion 0.6 -> 0.1: fits")


def test_the_headline_goes_by_every_trial_not_the_closest_alone() -> None:
    """The closest trial (1 % over the memory) overflows, another fits in memory and misses the
    floor: "every trial overflows the IPU's memory" was not true of that one."""
    from ipu_tune.explain import no_plan_headline

    study = optuna.create_study()
    _pruned(study, [0.01, -1.0])
    assert no_plan_headline(study) == "no plan fits: every trial overflows the IPU's memory"
    _pruned(study, [-0.5, 1.0])
    assert no_plan_headline(study) == ("no plan meets the search's constraints: the trials "
                                       "that fit in memory miss the throughput floor")
    assert TrialRecord.of(study.trials[1]).missed == ("throughput_floor",)
