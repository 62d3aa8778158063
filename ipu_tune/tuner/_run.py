"""`run(cfg)`: everything `python -m ipu_tune ...` does, with typed inputs and no Hydra."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from joblib import Parallel, delayed

from ipu_tune._api import evaluate_config
from ipu_tune.config import EvalConfig, TuneConfig, load_config, to_plain_dict
from ipu_tune.config._validate import check_pinned_layout, validate
from ipu_tune.errors import IpuTuneError
from ipu_tune.hardware import make_system
from ipu_tune.models import ModelProfile, profile_model
from ipu_tune.plan import plan_from_config, stage_starts
from ipu_tune.results import (
    ResultsStore,
    atomic_write,
    best_yaml_text,
    poprun_provenance,
    write_exports,
    write_report,
)
from ipu_tune.search import SearchProblem
from ipu_tune.simulator import SIMULATOR_VERSION, SimResult
from ipu_tune.storage import StorageTarget, open_storage, resolve_storage
from ipu_tune.tuner._study import (
    default_study_name,
    enqueue_warm_start,
    open_study,
    recover_stale_trials,
)
from ipu_tune.tuner._worker import count_done, work

__all__ = ["RunSummary", "export_study", "run"]


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


@dataclass(frozen=True)
class _Prepared:
    cfg: TuneConfig
    name: str
    target: StorageTarget
    profile: ModelProfile
    problem: SearchProblem


def _prepare(cfg: TuneConfig, pinned: frozenset[str]) -> _Prepared:
    """Every check that needs no writing: config, model, starting plan, search space."""
    validate(cfg, check_layout=False)
    if cfg.study.n_trials < 1:
        raise IpuTuneError(f"study.n_trials={cfg.study.n_trials}: must be >= 1")
    if cfg.study.workers < 1:
        raise IpuTuneError(f"study.workers={cfg.study.workers}: must be >= 1")
    profile = profile_model(cfg.model)
    stage_starts(plan_from_config(cfg), profile)
    check_pinned_layout(cfg, pinned)
    system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
    problem = SearchProblem(cfg, profile, system, pinned=pinned)
    name = cfg.study.name or default_study_name(cfg)
    target = resolve_storage(cfg.study.storage, cfg.results_dir)
    return _Prepared(cfg, name, target, profile, problem)


def _worker_entry(cfg: TuneConfig, pinned: frozenset[str], index: int) -> int:
    prep = _prepare(cfg, pinned)
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


def run(cfg: TuneConfig, pinned: frozenset[str] = frozenset()) -> RunSummary:
    """Tune: create or resume the study, reach `study.n_trials` finished trials, export."""
    prep = _prepare(cfg, pinned)
    storage = open_storage(prep.target)
    store = ResultsStore(prep.target.results_url)
    try:
        study, created = open_study(prep.name, storage, cfg, prep.problem, pinned)
        retried = recover_stale_trials(study, prep.target.claims)
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
    """Write best.yaml, the framework programs and report.html under results/<study>/."""
    out_dir = Path(cfg.results_dir) / study.study_name
    best = problem.best_trial(study)
    exports: dict[str, Path] = {}
    best_cfg: EvalConfig | None = None
    best_result: SimResult | None = None
    if best is not None:
        best_cfg = load_config(best.user_attrs["config"])
        best_result = evaluate_config(best_cfg)
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
                                                                 provenance))
        profile = profile_model(best_cfg.model)
        exports.update(write_exports(out_dir, best_cfg, best_result, profile))
    exports["report"] = write_report(
        out_dir / "report.html",
        study=study,
        results=store.frame(study.study_name),
        best_config=best_cfg,
        best_result=best_result,
        title=f"ipu-tune: {study.study_name}",
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
    )
