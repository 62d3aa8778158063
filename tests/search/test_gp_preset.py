"""`sampler=gp`: its own default budget (minutes, not the 100 trials TPE gets), its cost
documented in the preset, and no per-trial warning flood."""

from __future__ import annotations

from ipu_tune.config import CONF_DIR, compose


def test_gp_preset_has_a_small_default_budget_that_the_user_can_raise() -> None:
    assert compose(["sampler=gp"]).study.n_trials == 40
    assert compose(["sampler=gp", "study.n_trials=100"]).study.n_trials == 100
    assert compose([]).study.n_trials == 100  # TPE keeps the main budget


def test_gp_preset_documents_its_cost_and_silences_the_fallback_warning() -> None:
    text = (CONF_DIR / "sampler" / "gp.yaml").read_text()
    assert "s a trial" in text and "minutes" in text
    assert compose(["sampler=gp"]).sampler.params["warn_independent_sampling"] is False
