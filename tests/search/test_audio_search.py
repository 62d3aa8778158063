"""A search of an audio model: 8-bit I/O is never drawn, and a short one finds a plan."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.config import compose
from ipu_tune.tuner import run

from ._helpers import compose_cfg, make_problem


def test_8_bit_io_is_not_searched_for_audio() -> None:
    audio = make_problem(compose_cfg("model=hf", "model.hf.model_type=wav2vec2",
                                     "model.sequence_length=16000"))
    assert not audio.searches("plan.eight_bit_io", True)
    assert audio.profile.input_kind == "audio"


def test_wav2vec2_with_its_defaults_finds_a_fitting_plan_on_two_ipus(tmp_path: Path) -> None:
    """The default system (2 Mk2 IPUs), wav2vec2-base's CTC head on 20 s clips, 6 trials."""
    cfg = compose(["model=hf", "model.hf.model_type=wav2vec2", f"results_dir={tmp_path}",
                   "study.n_trials=6", "study.progress_bar=false", "study.storage=memory"])
    summary = run(cfg)
    assert summary.best_result is not None and summary.best_result.fits
    best = summary.best_config
    assert best is not None and best.plan.eight_bit_io is False
    assert summary.best_result.throughput > 0
