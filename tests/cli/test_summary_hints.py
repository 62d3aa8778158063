"""The summary names a faster plan the search did not take because it keeps a knob as the user
set it: twice the user's micro-batch (its ceiling), half partials in training (a numerics
choice). The figure comes from the sensitivity the run simulated, with the override."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from ipu_tune.cli._summary import format_summary
from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.tuner import RunSummary, run


def _run(tmp_path: Path, *overrides: str) -> RunSummary:
    base = [f"results_dir={tmp_path}", "study.n_trials=8", "study.progress_bar=false",
            "model=resnet18", "system.num_ipus=1"]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=[*base, *overrides]))
    return run(cfg)


def test_a_micro_batch_above_the_users_that_fits_and_is_faster_is_named(tmp_path: Path) -> None:
    summary = _run(tmp_path, "workload.micro_batch_size=1")
    assert summary.best_config is not None
    assert summary.best_config.workload.micro_batch_size == 1  # the search's ceiling
    assert summary.explanation is not None
    row = next(r for r in summary.explanation.sensitivity
               if r["key"] == "workload.micro_batch_size" and r["value"] == 2)
    assert row["fits"] and not row["searched"] and row["change_pct"] >= 5
    (line,) = [ln for ln in format_summary(summary).splitlines() if ln.startswith("micro-batch:")]
    assert line.startswith(f"micro-batch: 2 gives {row['throughput']:,.0f} samples/s "
                           f"({row['change_pct']:+.0f}%) and fits")
    assert "the search keeps yours, 1, as its ceiling" in line
    assert line.endswith("workload.micro_batch_size=2 to search up to it")


def test_no_line_when_twice_the_micro_batch_does_not_fit(tmp_path: Path) -> None:
    summary = _run(tmp_path, "workload.micro_batch_size=512")
    assert summary.explanation is not None
    doubled = [r for r in summary.explanation.sensitivity
               if r["key"] == "workload.micro_batch_size"
               and summary.best_config is not None
               and r["value"] > summary.best_config.workload.micro_batch_size]
    assert all(not r["fits"] or r["searched"] for r in doubled)
    assert not any(ln.startswith("micro-batch:") for ln in format_summary(summary).splitlines())


def test_half_partials_that_fit_and_are_faster_are_named_in_training(tmp_path: Path) -> None:
    """Graphcore's recipes run half partials; the summary said nothing of a +38% the search
    does not draw in training (only `explain` showed it)."""
    summary = _run(tmp_path, "workload.micro_batch_size=16")
    assert summary.best_config is not None and summary.explanation is not None
    assert summary.best_config.plan.partials == "float"
    row = next(r for r in summary.explanation.sensitivity
               if r["key"] == "plan.partials" and r["value"] == "half")
    assert row["fits"] and not row["searched"] and row["change_pct"] >= 5
    (line,) = [ln for ln in format_summary(summary).splitlines() if ln.startswith("partials:")]
    assert line.startswith(f"partials: half gives {row['throughput']:,.0f} samples/s "
                           f"({row['change_pct']:+.0f}%) and fits")
    assert line.endswith("plan.partials=half to take it")


def test_no_partials_line_where_the_search_draws_them_or_they_are_half(tmp_path: Path) -> None:
    for i, overrides in enumerate((["plan.partials=half"], ["workload.mode=infer"])):
        summary = _run(tmp_path / str(i), "workload.micro_batch_size=16", *overrides)
        assert summary.best_config is not None
        assert not any(ln.startswith("partials:") for ln in format_summary(summary).splitlines())


def test_a_plan_read_from_an_ipu_config_says_its_host_side_is_the_default(
        tmp_path: Path) -> None:
    """An IPUConfig states no loader: the speed-up over the file's plan counts one synchronous
    worker, which the line says (a ViT config read 84.71x with no word why)."""
    import json

    (tmp_path / "ipu_config.json").write_text(json.dumps(
        {"layers_per_ipu": [-1], "ipus_per_replica": 1, "gradient_accumulation_steps": 8}))
    summary = _run(tmp_path, f"plan.from_ipu_config={tmp_path}", "model=hf",
                   "model.hf.model_type=bert", "model.hf.config={num_hidden_layers: 2}")
    best = next(x for x in format_summary(summary).splitlines() if x.startswith("best:"))
    assert "x your plan's samples/s (your plan's host side is ipu-tune's defaults" in best, best
    plain = _run(tmp_path / "plain", "workload.micro_batch_size=16")
    best = next(x for x in format_summary(plain).splitlines() if x.startswith("best:"))
    assert "host side" not in best
    # A loader set on the command line is the user's, not the default the note names.
    set_loader = _run(tmp_path / "loader", f"plan.from_ipu_config={tmp_path}", "model=hf",
                      "model.hf.model_type=bert", "model.hf.config={num_hidden_layers: 2}",
                      "plan.dataloader_workers=16", "plan.async_dataloader=true")
    best = next(x for x in format_summary(set_loader).splitlines() if x.startswith("best:"))
    assert "x your plan's samples/s" in best and "host side" not in best, best
