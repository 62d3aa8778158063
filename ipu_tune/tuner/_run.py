"""`run(cfg)`: everything `python -m ipu_tune ...` does, with typed inputs and no Hydra."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from joblib import Parallel, delayed

from ipu_tune.case import Case, build_case
from ipu_tune.config import (
    EvalConfig,
    TuneConfig,
    check_pinned_layout,
    load_config,
    to_plain_dict,
    validate,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.explain import explain_study
from ipu_tune.records import TrialRecord
from ipu_tune.results import (
    ResultsStore,
    atomic_write,
    best_yaml_text,
    poprun_provenance,
    study_dir,
    write_exports,
    write_report,
)
from ipu_tune.search import SearchProblem, change_list
from ipu_tune.simulator import SIMULATOR_VERSION, SimResult
from ipu_tune.storage import StorageTarget, open_storage, resolve_storage
from ipu_tune.tuner._study import (
    default_study_name,
    enqueue_warm_start,
    open_study,
    recover_stale_trials,
)
from ipu_tune.tuner._worker import count_done, work

__all__ = ["Prepared", "RunSummary", "export_study", "prepare", "run"]


@dataclass(frozen=True)
class RunSummary:
    study_name: str
    storage: str  # display form (no credentials)
    n_complete: int
    ran_here: int
    retried: tuple[int, ...]
    best_trial: int | None
    best_config: EvalConfig | None
    best_result: SimResult | None
    exports: dict[str, Path] = field(default_factory=dict)
    objectives: dict[str, float] = field(default_factory=dict)  # the best trial's values
    objective_names: tuple[str, ...] = ()  # search.objectives, in order (also with no best)
    changes: tuple[str, ...] = ()  # knobs the best changed from the user's plan (`fit`)
    explanation: dict[str, Any] | None = None  # `ipu_tune.explain.explain_study`


@dataclass(frozen=True)
class Prepared:
    """A checked run: the config, its study name and storage, the case and the search."""

    cfg: TuneConfig
    pinned: frozenset[str]
    name: str
    target: StorageTarget
    case: Case  # the user's starting plan (stages x replicas need not match the system)
    problem: SearchProblem


def prepare(cfg: TuneConfig, pinned: frozenset[str] = frozenset()) -> Prepared:
    """Every check that needs no writing: config, model, starting plan, search space.

    Raises `IpuTuneError` on the first problem; `run(prepare(...))` then tunes.
    """
    validate(cfg, check_layout=False)
    if cfg.study.n_trials < 1:
        raise IpuTuneError(f"study.n_trials={cfg.study.n_trials}: must be >= 1")
    if cfg.study.workers < 1:
        raise IpuTuneError(f"study.workers={cfg.study.workers}: must be >= 1")
    case = build_case(cfg)
    check_pinned_layout(cfg, pinned)
    problem = SearchProblem(cfg, case.profile, case.system, pinned=pinned)
    name = cfg.study.name or default_study_name(cfg)
    target = resolve_storage(cfg.study.storage, cfg.results_dir)
    return Prepared(cfg, frozenset(pinned), name, target, case, problem)


def _worker_entry(cfg: TuneConfig, pinned: frozenset[str], index: int) -> int:
    # A loky worker is a fresh process: it prepares its own problem (the same public path).
    prep = prepare(cfg, pinned)
    storage = open_storage(prep.target)
    study = optuna.load_study(study_name=prep.name, storage=storage,
                              sampler=prep.problem.sampler())
    store = ResultsStore(prep.target.results_url)
    try:
        return work(study, prep.problem, store, prep.target.claims, cfg.study.n_trials,
                    cfg.study.timeout_s,
                    progress=cfg.study.progress_bar and index == 0)
    finally:
        store.close()


def run(cfg: TuneConfig | Prepared, pinned: frozenset[str] = frozenset()) -> RunSummary:
    """Tune: create or resume the study, reach `study.n_trials` finished trials, export.

    `cfg` is a config (prepared here) or the result of `prepare` (not prepared again).
    """
    prep = cfg if isinstance(cfg, Prepared) else prepare(cfg, pinned)
    cfg, pinned = prep.cfg, prep.pinned
    storage = open_storage(prep.target)
    store = ResultsStore(prep.target.results_url)
    try:
        study, created = open_study(prep.name, storage, cfg, prep.problem, pinned)
        retried = recover_stale_trials(study, storage, prep.target.claims)
        store.sync(study)
        if created and cfg.search.warm_start:
            enqueue_warm_start(study, prep.problem, cfg.study.n_trials)
        if cfg.study.workers == 1:
            ran = work(study, prep.problem, store, prep.target.claims, cfg.study.n_trials,
                       cfg.study.timeout_s,
                       progress=cfg.study.progress_bar)
        else:
            counts = Parallel(n_jobs=cfg.study.workers, backend="loky")(
                delayed(_worker_entry)(cfg, pinned, i) for i in range(cfg.study.workers)
            )
            ran = sum(int(c) for c in counts)
        store.sync(study)
        return export_study(study, prep.problem, store, cfg, prep.target, ran, tuple(retried))
    finally:
        store.close()


def export_study(
    study: optuna.Study,
    problem: SearchProblem,
    store: ResultsStore,
    cfg: TuneConfig,
    target: StorageTarget,
    ran: int = 0,
    retried: tuple[int, ...] = (),
) -> RunSummary:
    """Write best.yaml, the PopTorch snippet and report.html under results/<study>/."""
    out_dir = study_dir(cfg.results_dir, study.study_name)  # refuses names that escape
    best = problem.best_trial(study)
    exports: dict[str, Path] = {}
    best_cfg: EvalConfig | None = None
    best_result: SimResult | None = None
    snippet: str | None = None
    if best is not None:
        record = TrialRecord.of(best)
        best_cfg = load_config(dict(record.config))
        # The result stored with the trial; only a study older than that is simulated again.
        best_result = record.sim_result() or problem.simulate(best_cfg)
        best_path = out_dir / "best.yaml"
        evaluate_cmd = f"python -m ipu_tune evaluate {shlex.quote(str(best_path))}"
        provenance = {
            "study": study.study_name,
            "trial": best.number,
            "storage": target.display,
            "objectives": dict(zip(problem.objective_names, best.values or [], strict=False)),
            "throughput": best_result.throughput,
            "fits": best_result.fits,
            "bottleneck": best_result.bottleneck,
            "simulator_version": SIMULATOR_VERSION,
            "evaluate": evaluate_cmd,
            **poprun_provenance(best_cfg),
        }
        exports["best"] = atomic_write(best_path, best_yaml_text(to_plain_dict(best_cfg),
                                                                 provenance), cfg.results_dir)
        # Built once: the files and the report's copy of the PopTorch program are the same text.
        exports.update(write_exports(out_dir, best_cfg, best_result, problem.profile,
                                     root=cfg.results_dir))
        snippet = exports["poptorch"].read_text()
    explanation = explain_study(study, problem)
    exports["report"] = write_report(
        out_dir / "report.html",
        study=study,
        results=store.frame(study.study_name),
        best_config=best_cfg,
        best_result=best_result,
        title=f"ipu-tune: {study.study_name}",
        snippet=snippet,
        explanation=explanation,
        best_trial=best.number if best is not None else None,
    )
    return RunSummary(
        study_name=study.study_name,
        storage=target.display,
        n_complete=count_done(study),
        ran_here=ran,
        retried=retried,
        best_trial=best.number if best is not None else None,
        best_config=best_cfg,
        best_result=best_result,
        exports=exports,
        objectives=dict(zip(problem.objective_names, best.values or [], strict=False))
        if best is not None
        else {},
        objective_names=tuple(problem.objective_names),
        changes=tuple(change_list(best_cfg, problem.codec.user)) if best_cfg is not None else (),
        explanation=explanation,
    )
