"""A best plan whose pipeline schedule a framework cannot run: PopTorch and PopART render the
best stored trial they can run (or the best plan switched to grouped, simulated once), and say
so in their header; TensorFlow keeps the interleaved schedule."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

import ipu_tune
from ipu_tune._api import evaluate_config
from ipu_tune.config import EvalConfig, load_config, to_plain_dict
from ipu_tune.exports import (
    EXPORTERS,
    Exports,
    Provenance,
    StoredTrials,
    export_context,
    poprun_command,
    write_exports,
)
from ipu_tune.knobs import rate_text
from ipu_tune.plan import plan_from_config
from ipu_tune.records import TrialRecord, result_payload
from ipu_tune.simulator import SimResult

from ._export_plans import install_frameworks, simulated_head
from ._recorder import run_source
from .test_popart import check_popart
from .test_poptorch import check_poptorch, run_export
from .test_tf_ipu_config import check_tf, run_tf

# BERT-Large over 4 IPUs with recomputation at every block, the MLM head on every token. The
# simulator finds, for micro-batch 8, the interleaved schedule fitting (N+1 stashes) and the
# grouped one not (2N+1 on IPU0); at micro-batch 6 both fit and grouped is the faster. The tied
# head on IPU0 is a fifth pipeline stage (one more ramp slot).
BERT_LARGE: dict[str, Any] = {
    "model": {"name": "bert_large", "sequence_length": 128, "kwargs": {"masked_positions": None}},
    "workload": {"mode": "train", "micro_batch_size": 8, "optimizer": "lamb"},
    "system": {"ipu": "mk2", "num_ipus": 4, "hosts": 1},
    "plan": {"precision": "16.16", "gradient_accumulation": 64, "device_iterations": 4,
             "replication_factor": 1, "recompute": "every_block",
             "pipeline": {"splits": ["encoder.layer.6", "encoder.layer.12", "encoder.layer.18"],
                          "schedule": "interleaved"},
             "available_memory_proportion": 0.6, "offload_optimizer_state": True},
}  # fmt: skip


def bert(schedule: str, micro_batch: int = 8, ga: int = 64) -> EvalConfig:
    raw = copy.deepcopy(BERT_LARGE)
    raw["plan"]["pipeline"]["schedule"] = schedule
    raw["plan"]["gradient_accumulation"] = ga
    raw["workload"]["micro_batch_size"] = micro_batch
    return load_config(raw)


def study_of(*trials: tuple[EvalConfig, bool]) -> optuna.Study:
    """A throughput study whose trials are these plans, each simulated and stored as the tuner
    stores them (`ipu_tune.records`); the flag says whether its constraints hold."""
    study = optuna.create_study(direction="maximize")
    for cfg, feasible in trials:
        result = evaluate_config(cfg)
        trial = study.ask()
        TrialRecord.write_plan(trial, to_plain_dict(cfg), result_payload(result))
        TrialRecord.write_constraints(trial, ["memory"], [0.0 if feasible else 1.0])
        study.tell(trial, [result.throughput])
    return study


class Counting:
    """The study's simulation path, counting its calls."""

    def __init__(self) -> None:
        self.configs: list[EvalConfig] = []

    def __call__(self, cfg: EvalConfig) -> SimResult:
        self.configs.append(cfg)
        return evaluate_config(cfg)


def export(study: optuna.Study, best: int, out: Path,
           simulate: Callable[[EvalConfig], SimResult] | None = None,
           values: Callable[[EvalConfig, SimResult], tuple[list[float], str]] | None = None,
           ) -> Exports:
    """Write the exports of trial `best` of `study` as the tuner does (`values`: the study's
    objective values of a changed plan; None: the stored trial comes first)."""
    record = TrialRecord.of(study.trials[best])
    cfg = load_config(dict(record.config))
    result = record.sim_result()
    assert result is not None
    provenance = Provenance.of("s", best, "memory", {"throughput": result.throughput}, out)
    ctx = export_context(cfg, result, ipu_tune.profile(cfg.model), provenance)
    return write_exports(ctx, out, stored=StoredTrials(study.trials, ["maximize"], simulate,
                                                       values))


def flat(text: str) -> str:
    """The module docstring with its wrapping undone."""
    return " ".join((ast.get_docstring(ast.parse(text)) or "").split())


def throughput(study: optuna.Study, number: int) -> float:
    result = TrialRecord.of(study.trials[number]).sim_result()
    assert result is not None
    return result.throughput


def test_a_best_interleaved_study_gives_poptorch_and_popart_its_best_grouped_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Micro-batch 7: IPU0's 6 layers, embeddings and head stage hold 8 at no schedule.
    study = study_of((bert("interleaved", micro_batch=7), True), (bert("sharded"), True),
                     (bert("grouped", micro_batch=6, ga=48), True),
                     (bert("grouped", micro_batch=6, ga=128), False),  # faster, infeasible
                     (bert("interleaved", micro_batch=6), True))
    assert max(range(5), key=lambda n: throughput(study, n) if n != 3 else 0) == 0
    assert throughput(study, 3) > throughput(study, 0)  # the infeasible one is not chosen
    exports = export(study, 0, tmp_path)
    best, alt = throughput(study, 0), throughput(study, 2)
    for name, fw in (("poptorch", "PopTorch"), ("popart", "PopART")):
        line = (f"The study's best plan (trial 0, {best:,.0f} samples/s) uses the interleaved"
                f" schedule, which {fw} cannot run; this program is the best plan {fw} can run:"
                f" trial 2, {alt:,.0f} samples/s ({100 * alt / best:.1f}% of the best plan's).")
        text = exports.paths[name].read_text()
        assert line in flat(text)
        assert exports.stand_ins[name] == line
        assert f"Simulated: {rate_text(alt)}" in flat(text)
    assert set(exports.stand_ins) == {"poptorch", "popart"}
    # The files hold the grouped trial's plan: run them against the recording frameworks.
    grouped = bert("grouped", micro_batch=6, ga=48)
    source = exports.texts["poptorch"]
    log, _ = run_export(monkeypatch, source)
    check_poptorch(grouped, source, log, False, simulated_head(grouped))
    assert "poptorch.PipelinedExecution" in {repr(a[0]) for a, _ in
                                             log.calls("poptorch.Options.setExecutionStrategy")}
    log = install_frameworks(monkeypatch, False)
    source = exports.texts["popart"]
    check_popart(grouped, source, log, run_source(source, "popart_options.py"), False,
                 simulated_head(grouped))
    assert log.sets("popart.SessionOptions.enablePipelining") == [True]


def test_tensorflow_and_best_yaml_keep_the_interleaved_best_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = study_of((bert("interleaved"), True), (bert("grouped", micro_batch=6), True))
    exports = export(study, 0, tmp_path)
    source = exports.texts["tensorflow"]
    assert "PipelineSchedule.Interleaved" in source and "cannot run" not in source
    log, namespace = run_tf(monkeypatch, source, False)
    check_tf(bert("interleaved"), source, log, namespace, False,
             simulated_head(bert("interleaved")))
    best = yaml.safe_load(exports.paths["best"].read_text())
    assert best["plan"]["pipeline"]["schedule"] == "interleaved"
    assert best["ipu_tune"]["trial"] == 0


def test_without_a_qualifying_trial_the_best_plan_switched_to_grouped_is_simulated_once(
    tmp_path: Path,
) -> None:
    study = study_of((bert("interleaved", micro_batch=6), True),
                     (bert("interleaved", micro_batch=4), True),
                     (bert("grouped"), False))  # grouped, but does not fit
    counting = Counting()
    exports = export(study, 0, tmp_path, counting)
    # One simulation for both programs, of the best plan with the grouped schedule.
    assert [c.plan.pipeline.schedule for c in counting.configs] == ["grouped"]
    switched = bert("grouped", micro_batch=6)
    assert plan_from_config(counting.configs[0]) == plan_from_config(switched)
    got = evaluate_config(switched).throughput
    best = throughput(study, 0)
    for name, fw in (("poptorch", "PopTorch"), ("popart", "PopART")):
        text = flat(exports.texts[name])
        assert (f"which {fw} cannot run; no stored trial {fw} can run fits and keeps the study's"
                " constraints, so this program is"
                f" that plan with the grouped schedule, simulated at {got:,.0f} samples/s"
                f" ({100 * got / best:.1f}% of the best plan's).") in text
        assert f"Simulated: {rate_text(got)}" in text


def test_when_no_plan_poptorch_runs_fits_the_program_says_so(tmp_path: Path) -> None:
    study = study_of((bert("interleaved"), True))
    assert not evaluate_config(bert("grouped")).fits
    exports = export(study, 0, tmp_path)
    for name, fw in (("poptorch", "PopTorch"), ("popart", "PopART")):
        text = flat(exports.texts[name])
        assert (f"which {fw} cannot run; no plan {fw} can run fits: no stored trial, nor that"
                " plan with the grouped schedule, which this program holds") in text
        assert "DOES NOT FIT" in text  # its figures are the switched plan's
    assert "PipelineSchedule.Interleaved" in exports.texts["tensorflow"]


def test_each_exporter_declares_the_schedules_its_framework_runs() -> None:
    runs = {e.name: e.schedules for e in EXPORTERS}
    grouped = plan_from_config(bert("grouped"))
    plans = {s: replace(grouped, schedule=s) for s in ("grouped", "interleaved", "sharded")}
    infer = {s: replace(p, mode="infer") for s, p in plans.items()}

    def can(name: str, by: dict[str, Any]) -> set[str]:
        declared = runs[name]
        return {s for s, p in by.items() if declared is None or declared.runs(p)}

    assert can("poptorch", plans) == can("popart", plans) == {"grouped", "sharded"}
    assert can("tensorflow", plans) == {"grouped", "interleaved", "sharded"}
    assert can("best", plans) == can("poprun", plans) == {"grouped", "interleaved", "sharded"}
    # optimum-graphcore trains with PipelinedExecution and infers with ShardedExecution.
    assert can("ipu_config", plans) == can("optimum", plans) == {"grouped"}
    assert can("ipu_config", infer) == can("optimum", infer) == {"sharded"}
    one_stage = replace(plans["interleaved"], splits=())
    assert all(e.schedules is None or e.schedules.runs(one_stage) for e in EXPORTERS)


def test_poprun_launches_the_tensorflow_program_for_a_schedule_poptorch_cannot_run() -> None:
    raw = copy.deepcopy(BERT_LARGE)
    raw["system"] = {"ipu": "mk2", "num_ipus": 16, "hosts": 2}
    raw["plan"].update(replication_factor=4, host_instances=2)
    line = {s: poprun_command(export_context(load_config(
        {**raw, "plan": {**raw["plan"], "pipeline": {**raw["plan"]["pipeline"],
                                                     "schedule": s}}})))
            for s in ("grouped", "interleaved")}  # fmt: skip
    assert line["grouped"] is not None and line["interleaved"] is not None
    assert line["grouped"].endswith(" python poptorch_options.py")
    assert line["interleaved"].endswith(" python your_keras_program.py")
    assert line["grouped"].split(" python")[0] == line["interleaved"].split(" python")[0]


def test_the_tuner_gives_poptorch_a_plan_it_runs_when_every_trial_is_interleaved(
    tmp_path: Path,
) -> None:
    from hydra import compose, initialize_config_dir

    from ipu_tune.config import CONF_DIR, TuneConfig, typed
    from ipu_tune.knobs import KNOBS
    from ipu_tune.storage import ResultsStore, resolve_storage
    from ipu_tune.tuner import run

    overrides = [f"results_dir={tmp_path}", "study.n_trials=30", "study.progress_bar=false",
                 "model=bert_large", "system.num_ipus=4", "plan.pipeline.schedule=interleaved"]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=overrides))
    summary = run(cfg, frozenset({"plan.pipeline.schedule"}))
    assert summary.best_config is not None and summary.best_result is not None
    assert summary.best_config.plan.pipeline.splits  # pipelined: the schedule matters
    rows = ResultsStore(resolve_storage(None, str(tmp_path)).results_url).rows(summary.study_name)
    column = {k.key: k.column for k in KNOBS}
    schedule, splits = column["plan.pipeline.schedule"], column["plan.pipeline.splits"]
    assert {r[schedule] for r in rows} == {"interleaved"}
    # PopTorch runs a stored trial only on one stage; else the best plan switched to grouped.
    one_stage = [r for r in rows if r["feasible"] and r["fits"] and r[splits] == "[]"]
    text = flat(summary.exports["poptorch"].read_text())
    head = (f"The study's best plan (trial {summary.best_trial},"
            f" {summary.best_result.throughput:,.0f} samples/s) uses the interleaved schedule,"
            " which PopTorch cannot run; ")
    assert head in text
    # The better, by throughput, of that trial and the best plan switched to grouped.
    best = summary.best_config
    grouped = evaluate_config(replace(best, plan=replace(best.plan, pipeline=replace(
        best.plan.pipeline, schedule="grouped"))))
    if one_stage:
        top = max(one_stage, key=lambda r: (r["throughput"], -r["trial_number"]))
        if grouped.fits and grouped.throughput > top["throughput"]:
            assert ("which ranks above the best stored trial PopTorch can run"
                    f" (trial {top['trial_number']},") in text
        else:
            assert f"can run: trial {top['trial_number']}," in text
    else:
        assert "no stored trial PopTorch can run fits and keeps the study's constraints" in text
    assert "PipelineSchedule.Interleaved" in summary.exports["tensorflow"].read_text()
    # The run's summary says, under the PopTorch line, that the program holds another plan.
    from ipu_tune.cli._summary import format_summary

    lines = format_summary(summary).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("PopTorch program: "))
    assert lines[at + 1].strip() == summary.stand_ins["poptorch"]
    assert lines[at + 1].strip().startswith("The study's best plan (trial ")


def test_the_summary_says_once_what_optimums_two_files_hold(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from ipu_tune.cli._summary import format_summary
    from ipu_tune.config import CONF_DIR, TuneConfig, typed
    from ipu_tune.tuner import run

    # Sharded training: optimum-graphcore trains pipelined only, in both of its files.
    overrides = [f"results_dir={tmp_path}", "study.n_trials=4", "study.progress_bar=false",
                 "model=gpt2", "plan.pipeline.schedule=sharded"]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=overrides))
    summary = run(cfg, frozenset({"plan.pipeline.schedule"}))
    assert summary.stand_ins["ipu_config"] == summary.stand_ins["optimum"]
    lines = format_summary(summary).splitlines()
    assert lines.count(f"  {summary.stand_ins['optimum']}") == 1


def test_optimum_infers_a_grouped_best_plan_switched_to_sharded_and_says_so(
    tmp_path: Path,
) -> None:
    raw = {"model": {"name": "gpt2", "sequence_length": 128},
           "workload": {"mode": "infer", "micro_batch_size": 1},
           "system": {"ipu": "mk2", "num_ipus": 4, "hosts": 1},
           "plan": {"precision": "16.16", "gradient_accumulation": 1, "device_iterations": 16,
                    "replication_factor": 2, "partials": "half",
                    "pipeline": {"splits": ["transformer.h.6"], "schedule": "grouped"}}}
    cfg = load_config(raw)
    study = study_of((cfg, True))
    assert TrialRecord.of(study.trials[0]).sim_result() is not None
    exports = export(study, 0, tmp_path)
    sharded = evaluate_config(load_config(
        {**raw, "plan": {**raw["plan"], "pipeline": {"splits": ["transformer.h.6"],
                                                     "schedule": "sharded"}}}))
    assert sharded.fits
    best = throughput(study, 0)
    text = flat(exports.texts["optimum"])
    assert (f"The study's best plan (trial 0, {best:,.0f} samples/s) uses the grouped schedule,"
            " which optimum-graphcore cannot run for inference; no stored trial"
            " optimum-graphcore can run fits and keeps the study's constraints, so this program"
            " is that plan with the sharded"
            f" schedule, simulated at {sharded.throughput:,.0f} samples/s") in text
    compile(exports.texts["optimum"], "run_with_optimum.py", "exec")
    assert set(exports.stand_ins) == {"ipu_config", "optimum"}  # PopTorch runs it grouped
    assert "poptorch.PipelinedExecution" in exports.texts["poptorch"]
