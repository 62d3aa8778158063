"""A framework rule besides the pipeline schedule: TensorFlow's replicated_optimizer_state_sharding
partitions offloaded optimizer state only (framework-apis.md 3.2; pipelining_ops.py L410). A study
whose best plan shards on-chip state gives tf_ipu_config.py the best stored trial TensorFlow runs
(or the best plan with its state offloaded), chosen as for a schedule; PopTorch and PopART, which
shard on-chip state, keep the best plan."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ipu_tune
from ipu_tune._api import evaluate_config
from ipu_tune.config import EvalConfig, load_config
from ipu_tune.exports import EXPORTERS, export_context
from ipu_tune.exports._context import compile_problems
from ipu_tune.knobs import rate_text
from ipu_tune.plan import plan_from_config

from ._export_plans import simulated_head
from .test_schedules import Counting, export, flat, study_of, throughput
from .test_tf_ipu_config import check_tf, run_tf

TENSORFLOW_RUNS = next(e.schedules for e in EXPORTERS if e.name == "tensorflow").runs  # type: ignore[union-attr]

# GPT-2 at sequence length 1024 on a POD16: 4 replicas of 4 stages, optimizer state on chip and
# sharded across the replicas. With the state unsharded it does not fit; offloaded (and
# sharded) it does.
GPT2: dict[str, Any] = {
    "model": {"name": "gpt2", "sequence_length": 1024},
    "workload": {"mode": "train", "micro_batch_size": 1, "optimizer": "adamw"},
    "system": {"ipu": "mk2", "num_ipus": 16},
    "plan": {"precision": "16.16", "gradient_accumulation": 64, "device_iterations": 64,
             "replication_factor": 4, "recompute": "every_block",
             "pipeline": {"splits": ["transformer.h.0", "transformer.h.4", "transformer.h.8"],
                          "schedule": "grouped"},
             "available_memory_proportion": 0.25, "offload_optimizer_state": False,
             "replicated_tensor_sharding": True, "prefetch_depth": 3},
}  # fmt: skip

WHY = ("shards its on-chip optimizer state across replicas (replicated tensor sharding without"
       " offload), which TensorFlow cannot run (its replicated_optimizer_state_sharding"
       " partitions offloaded optimizer state only)")


def gpt2(offload: bool = False, rts: bool = True, ga: int = 64) -> EvalConfig:
    raw = copy.deepcopy(GPT2)
    raw["plan"].update(offload_optimizer_state=offload, replicated_tensor_sharding=rts,
                       gradient_accumulation=ga)
    return load_config(raw)


def test_the_simulator_fits_the_plan_only_with_its_state_sharded() -> None:
    """The premise: the on-chip RTS plan fits, unsharded it does not, offloaded it does."""
    assert evaluate_config(gpt2()).fits
    assert not evaluate_config(gpt2(rts=False)).fits
    assert evaluate_config(gpt2(offload=True)).fits


def test_tensorflow_declares_it_cannot_run_on_chip_rts_and_the_others_can() -> None:
    by = {e.name: e.schedules for e in EXPORTERS}
    plans = {"on-chip rts": plan_from_config(gpt2()),
             "offloaded rts": plan_from_config(gpt2(offload=True)),
             "no rts": plan_from_config(gpt2(rts=False))}
    tf = by["tensorflow"]
    assert tf is not None
    assert {k for k, p in plans.items() if tf.runs(p)} == {"offloaded rts", "no rts"}
    for name in ("poptorch", "popart", "best", "poprun", "ipu_config", "optimum"):
        declared = by[name]
        assert declared is None or all(declared.runs(p) for p in plans.values()), name
    # Inference shards no optimizer state.
    assert tf.runs(replace(plans["on-chip rts"], mode="infer"))


def test_the_tf_program_warns_when_it_holds_on_chip_rts() -> None:
    ctx = export_context(gpt2())
    assert [p for p in compile_problems(ctx, "tensorflow") if "on-chip" in p] == [
        f"the plan {WHY}"]
    assert not any("on-chip" in p for p in compile_problems(ctx, "poptorch"))
    assert not any("on-chip" in p for p in compile_problems(export_context(gpt2(offload=True)),
                                                            "tensorflow"))


def test_tensorflow_gets_the_best_stored_trial_it_runs_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = study_of((gpt2(), True), (gpt2(rts=False), True),  # does not fit
                     (gpt2(offload=True, ga=32), True))
    assert throughput(study, 0) > throughput(study, 2)
    exports = export(study, 0, tmp_path)
    best, alt = throughput(study, 0), throughput(study, 2)
    line = (f"The study's best plan (trial 0, {best:,.0f} samples/s) {WHY}; this program is the"
            f" best plan TensorFlow can run: trial 2, {alt:,.0f} samples/s"
            f" ({100 * alt / best:.1f}% of the best plan's).")
    source = exports.texts["tensorflow"]
    assert line in flat(source) and exports.stand_ins["tensorflow"] == line
    assert f"Simulated: {rate_text(alt)}" in flat(source)
    assert "WARNING" not in source
    assert set(exports.stand_ins) == {"tensorflow"}  # PopTorch and PopART shard on-chip state
    log, namespace = run_tf(monkeypatch, source, False)
    check_tf(gpt2(offload=True, ga=32), source, log, namespace, False,
             simulated_head(gpt2(offload=True, ga=32)))
    ((_, kwargs),) = log.calls("keras.Model.set_pipelining_options")
    assert kwargs["offload_weight_update_variables"] is True
    assert kwargs["replicated_optimizer_state_sharding"] is True


def test_without_a_stored_trial_tensorflow_gets_the_best_plan_with_its_state_offloaded(
    tmp_path: Path,
) -> None:
    study = study_of((gpt2(), True), (gpt2(rts=False), True))
    counting = Counting()
    exports = export(study, 0, tmp_path, counting)
    assert [plan_from_config(c) for c in counting.configs] == [plan_from_config(gpt2(True))]
    got = evaluate_config(gpt2(offload=True)).throughput
    best = throughput(study, 0)
    text = flat(exports.texts["tensorflow"])
    assert (f"{WHY}; no stored trial TensorFlow can run fits and keeps the study's constraints,"
            " so this program is that plan with"
            " its optimizer state offloaded (and sharded), simulated at"
            f" {got:,.0f} samples/s ({100 * got / best:.1f}% of the best plan's).") in text
    assert "offload_weight_update_variables=True" in exports.texts["tensorflow"]
    assert "offload_weight_update_variables=False" in exports.texts["poptorch"] or (
        "useOnChipStorage(True)" in exports.texts["poptorch"])


def _by_throughput(cfg: EvalConfig, result: Any) -> tuple[list[float], str]:
    return [result.throughput], ""


def test_the_best_plan_with_its_state_offloaded_wins_over_a_slower_stored_trial(
    tmp_path: Path,
) -> None:
    """Scored by the study's objectives, the changed best plan (562 samples/s) is taken over
    the best stored trial TensorFlow runs (521), and the header names the trial it beat."""
    study = study_of((gpt2(), True), (gpt2(offload=True, ga=32), True))
    counting = Counting()
    exports = export(study, 0, tmp_path, counting, _by_throughput)
    got, best, slower = (evaluate_config(gpt2(offload=True)).throughput, throughput(study, 0),
                         throughput(study, 1))
    assert got > slower
    assert (f"{WHY}; this program is that plan with its optimizer state offloaded (and sharded),"
            f" simulated at {got:,.0f} samples/s ({100 * got / best:.1f}% of the best plan's),"
            f" which ranks above the best stored trial TensorFlow can run (trial 1,"
            f" {slower:,.0f} samples/s).") in flat(exports.texts["tensorflow"])
    assert "offload_weight_update_variables=True" in exports.texts["tensorflow"]
    assert "gradient_accumulation_steps_per_replica=64" in exports.texts["tensorflow"]
    assert len(counting.configs) == 1  # the changed plan, simulated once


def test_a_stored_trial_that_ranks_above_the_changed_plan_is_kept(tmp_path: Path) -> None:
    """Scored by memory (less is better), the stored trial of a smaller proportion beats the
    changed best plan: TensorFlow gets the stored trial, as without a score."""
    small = gpt2(offload=True)
    small.plan.available_memory_proportion = 0.1  # type: ignore[misc]
    study = study_of((gpt2(), True), (small, True))

    def by_memory(cfg: EvalConfig, result: Any) -> tuple[list[float], str]:
        return [-max(m.total_bytes for m in result.memory)], ""  # higher is better: less

    exports = export(study, 0, tmp_path, None, by_memory)
    assert "this program is the best plan TensorFlow can run: trial 1" in flat(
        exports.texts["tensorflow"])


def test_the_tuner_scores_the_changed_plan_by_the_studys_objectives(tmp_path: Path) -> None:
    """The tuner's own run: TensorFlow's program holds whichever of the best stored trial it
    runs and the best plan with its state offloaded is faster, and says which it passed over."""
    from hydra import compose, initialize_config_dir

    from ipu_tune.config import CONF_DIR, TuneConfig, typed
    from ipu_tune.tuner import run

    overrides = [f"results_dir={tmp_path}", "study.n_trials=30", "study.progress_bar=false",
                 "model=gpt2", "system=pod16"]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=overrides))
    summary = run(cfg, frozenset())
    best = summary.best_config
    assert best is not None and summary.best_result is not None
    text = flat(summary.exports["tensorflow"].read_text())
    if not TENSORFLOW_RUNS(plan_from_config(best)):
        changed = evaluate_config(replace(best, plan=replace(best.plan,
                                                             offload_optimizer_state=True)))
        said = summary.stand_ins["tensorflow"]
        assert said in text
        if "ranks above the best stored trial" in said:
            assert f"simulated at {rate_text(changed.throughput)}" in said
            assert changed.fits and changed.throughput > float(
                said.split("samples/s).")[0].rsplit(", ", 1)[1].replace(",", ""))
        else:
            assert "this program is the best plan TensorFlow can run: trial" in said


def test_a_changed_plan_that_breaks_a_constraint_says_which_and_never_beats_a_trial(
    tmp_path: Path,
) -> None:
    """The best plan with its state offloaded misses the study's floor: without a stored trial
    TensorFlow runs, the program holds it and says which constraint it breaks; with one, the
    stored trial is kept however the changed plan's objectives rank."""
    floor = "throughput 562 samples/s below the floor 650 samples/s"

    def below_floor(cfg: EvalConfig, result: Any) -> tuple[list[float], str]:
        return [result.throughput], floor

    study = study_of((gpt2(), True), (gpt2(rts=False), True))
    text = flat(export(study, 0, tmp_path / "a", None, below_floor).texts["tensorflow"])
    assert f"; it breaks the study's constraints ({floor})." in text
    study = study_of((gpt2(), True), (gpt2(offload=True, ga=32), True))
    text = flat(export(study, 0, tmp_path / "b", None, below_floor).texts["tensorflow"])
    assert "this program is the best plan TensorFlow can run: trial 1" in text


def test_the_changed_plan_is_ranked_in_the_studys_own_order(tmp_path: Path) -> None:
    """`rank` is the study's order (its compromise, with several objectives): an order that
    puts the slower plan first keeps the slower stored trial over the faster changed plan."""
    from ipu_tune.exports import Provenance, StoredTrials, write_exports
    from ipu_tune.records import TrialRecord

    study = study_of((gpt2(), True), (gpt2(offload=True, ga=32), True))
    record = TrialRecord.of(study.trials[0])
    cfg, result = load_config(dict(record.config)), record.sim_result()
    assert result is not None

    def render(rank: Any) -> str:
        ctx = export_context(cfg, result, ipu_tune.profile(cfg.model),
                             Provenance.of("s", 0, "memory", {}, tmp_path))
        stored = StoredTrials(study.trials, ["maximize"], None, _by_throughput, rank)
        return flat(write_exports(ctx, tmp_path, stored=stored).texts["tensorflow"])

    assert "which ranks above the best stored trial TensorFlow can run (trial 1," in render(
        None)
    slower_first = render(lambda v: (v[0],))  # the study's order: less throughput is better
    assert "this program is the best plan TensorFlow can run: trial 1" in slower_first
