"""Sampler presets: `sampler=gp` has its own default budget (minutes, not the 100 trials TPE
gets) and its cost documented; neither gp nor cmaes floods the output with a warning per
knob and trial for the knobs they draw at random by design."""

from __future__ import annotations

import logging

import optuna
import pytest

from ipu_tune.config import CONF_DIR, compose
from ipu_tune.search import make_sampler


def test_gp_preset_has_a_small_default_budget_that_the_user_can_raise() -> None:
    assert compose(["sampler=gp"]).study.n_trials == 40
    assert compose(["sampler=gp", "study.n_trials=100"]).study.n_trials == 100
    assert compose([]).study.n_trials == 100  # TPE keeps the main budget


def test_gp_preset_documents_its_cost_and_silences_the_fallback_warning() -> None:
    text = (CONF_DIR / "sampler" / "gp.yaml").read_text()
    assert "s a trial" in text and "minutes" in text
    assert compose(["sampler=gp"]).sampler.params["warn_independent_sampling"] is False


def test_cmaes_preset_draws_categorical_knobs_at_random_without_a_warning_each(
        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("cmaes")
    sampler = make_sampler(compose(["sampler=cmaes"]).sampler)
    study = optuna.create_study(sampler=sampler)
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING, logger="optuna"):
            study.optimize(lambda t: t.suggest_float("x", 0, 1) + len(
                t.suggest_categorical("c", ["a", "bb"])), n_trials=14)
    finally:
        optuna.logging.disable_propagation()
    assert not [r for r in caplog.records if "independently" in r.getMessage()]
