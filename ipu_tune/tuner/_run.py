"""`run(cfg)`: everything `python -m ipu_tune ...` does, with typed inputs and no Hydra."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage

from ipu_tune import interrupts
from ipu_tune.case import Case, build_case
from ipu_tune.config import (
    EvalConfig,
    TuneConfig,
    check_pinned_layout,
    check_study_name,
    validate,
)
from ipu_tune.errors import IpuTuneError, disk_hint, one_line
from ipu_tune.explain import Explanation, explain_study
from ipu_tune.exports import (
    EXPORT_FILE_NAMES,
    Exports,
    Provenance,
    StoredTrials,
    apply_ipu_config,
    export_context,
    prepare_exports,
)
from ipu_tune.files import check_places, folder_lock, remove_stale_temps, write_files
from ipu_tune.knobs import ModelFacts
from ipu_tune.records import TrialRecord
from ipu_tune.report import report_bytes
from ipu_tune.results import sync_results
from ipu_tune.search import (
    Convergence,
    SearchProblem,
    SearchSpace,
    change_list,
    check_stored_trials,
    convergence,
    load_space,
    rank_key,
    stored_config,
)
from ipu_tune.simulator import SimResult
from ipu_tune.storage import (
    ResultsStore,
    StorageTarget,
    check_storage_places,
    open_storage,
    removing_new_files,
    resolve_storage,
    study_dir,
)
from ipu_tune.tuner._heartbeat import beating
from ipu_tune.tuner._study import (
    default_study_name,
    metadata,
    open_study,
    problem_differences,
    recover_stale_trials,
)
from ipu_tune.tuner._worker import count_done, work
from ipu_tune.tuner._worker_id import this_worker

__all__ = ["Prepared", "RunSummary", "check_shared_studies", "export_study", "prepare", "run"]

REPORT_FILE = "report.html"  # beside the exports, in the study's folder


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
    convergence: Convergence | None = None  # how the best evolved (ipu_tune.search)
    objective_names: tuple[str, ...] = ()  # search.objectives, in order (also with no best)
    changes: tuple[str, ...] = ()  # knobs the best changed from the user's plan (`fit`)
    explanation: Explanation | None = None  # `ipu_tune.explain.explain_study`
    # Export name -> its header's line, for an export holding another plan than the best (its
    # framework cannot run the best plan's schedule; `ipu_tune.exports.Exports.stand_ins`).
    stand_ins: dict[str, str] = field(default_factory=dict)
    # Wall seconds of this command's trial loop (its workers' included; the preparation before
    # it and the exports and report after it are not): benchmarks/tuner_overhead.py.
    trials_s: float = 0.0
    model: ModelFacts | None = None  # the model profile's facts (`knobs.moot_keys` reads them)


@dataclass(frozen=True)
class Prepared:
    """A checked run: the config, its study name and storage, the case and the search."""

    cfg: TuneConfig
    pinned: frozenset[str]
    name: str
    target: StorageTarget
    case: Case  # the user's starting plan (stages x replicas need not match the system)
    problem: SearchProblem


def _in_search_mode(cfg: TuneConfig, space: SearchSpace, pinned: frozenset[str]) -> TuneConfig:
    """`cfg` in the mode its search's trials run (the latency space's inference) unless pinned:
    an ipu_config.json is read for that mode's fields, the user's plan the file's for it."""
    mode = space.fixed.get("workload.mode")
    if mode is None or mode == cfg.workload.mode or "workload.mode" in pinned:
        return cfg
    return replace(cfg, workload=replace(cfg.workload, mode=mode))


def prepare(cfg: TuneConfig, pinned: frozenset[str] = frozenset()) -> Prepared:
    """Every check that needs no writing (config, model, starting plan, search space); raises
    `IpuTuneError` on the first problem, and `run(prepare(...))` then tunes."""
    validate(cfg, check_layout=False)
    space = load_space(cfg.search.space)  # read once: the mode below and the search
    if cfg.plan.from_ipu_config:  # the starting plan is the file's; command-line keys win
        cfg = apply_ipu_config(_in_search_mode(cfg, space, pinned), pinned)
        validate(cfg, check_layout=False)
    if cfg.study.n_trials < 1:
        raise IpuTuneError(f"study.n_trials={cfg.study.n_trials}: must be >= 1")
    if cfg.study.workers < 1:
        raise IpuTuneError(f"study.workers={cfg.study.workers}: must be >= 1")
    case = build_case(cfg, whole=False)  # a start: the search raises what PopTorch needs
    check_pinned_layout(cfg, pinned)
    problem = SearchProblem(cfg, case.profile, case.system, pinned=pinned, space=space)
    problem.sampler()  # made (and thrown away) to check sampler.* before the storage exists
    # The name an unnamed study gets when its default name is free (see `open_study`).
    name = cfg.study.name or default_study_name(cfg, frozenset(pinned))
    target = resolve_storage(cfg.study.storage, cfg.results_dir)
    check_storage_places(target)
    _check_export_places(cfg.results_dir, name, target)
    return Prepared(cfg, frozenset(pinned), name, target, case, problem)


def check_shared_studies(runs: Sequence[Prepared]) -> None:
    """Runs of one command (a sweep) naming the same study in one storage must be the same
    problem: the second would be refused after the first had run and exported, leaving half
    a sweep. Checked before any of them runs."""
    first: dict[tuple[str, str], Prepared] = {}
    for prep in runs:
        seen = first.setdefault((prep.target.location, prep.name), prep)
        diffs = [] if seen is prep else problem_differences(
            metadata(seen.cfg, seen.problem, seen.pinned),
            metadata(prep.cfg, prep.problem, prep.pinned))
        if diffs:
            raise IpuTuneError(
                f"study.name={prep.name!r}: the sweep's runs would share one study but are "
                f"different problems ({'; '.join(diffs[:3])}); allowed: leave study.name unset "
                "(each run gets a study of its own)")


def _check_export_places(results_dir: str, name: str, target: StorageTarget) -> None:
    """The study's folder and export files as `export_study` will write them, checked before
    any trial: a folder or file linked outside results_dir, or a device or FIFO in a file's
    place, is refused now, not after the search. So is a default name (`search.name` is
    free) that would collide with a storage's files or another storage's study folder."""
    check_study_name("study.name", name)
    out_dir = study_dir(results_dir, name, target.export_tag)
    check_places([out_dir / f for f in (*EXPORT_FILE_NAMES, REPORT_FILE)], "export path",
                 results_dir)


def _work(prep: Prepared, study: optuna.Study, storage: BaseStorage, store: ResultsStore,
          progress: bool, refine: bool = True) -> int:
    """One worker's trial loop with its heartbeat; stops between trials on SIGINT/SIGTERM."""
    cfg = prep.cfg
    with beating(study, storage, this_worker()) as claimed:
        return work(study, prep.problem, store, prep.target.claims, cfg.study.n_trials,
                    cfg.study.timeout_s, progress=progress,
                    on_trial=lambda _number: interrupts.check(), refine=refine, claimed=claimed,
                    storage=storage)


def _worker_main(prep: Prepared, name: str, index: int, ran: Any, said: Any) -> None:
    """A forked worker: the problem is the parent's (profile, space, warm plans, caches); only
    the storage is its own (a journal's writer id or a database connection must not be shared
    between processes). An error is not printed here but handed to the parent in `said`: the
    command ends with one line naming each worker that stopped and why."""
    interrupts.worker_process()
    if os.getppid() == 1:  # the parent died before the line above took effect
        os._exit(0)
    code = 0
    try:
        storage = open_storage(prep.target)
        store = ResultsStore(prep.target.results_url)
        try:
            opened = open_study(name, storage, prep.cfg, prep.problem, prep.pinned,
                                prep.target.claims, workers=prep.cfg.study.workers)
            # The first worker shows the progress bar and runs the local search.
            ran.value = _work(prep, opened.study, storage, store,
                              progress=prep.cfg.study.progress_bar and index == 0,
                              refine=index == 0)
        finally:
            store.close()
    except KeyboardInterrupt as exc:
        code = interrupts.exit_code(exc.signum if isinstance(exc, interrupts.Interrupted)
                                    else signal.SIGINT)
    except Exception as exc:  # a full disk, a lost connection: one line, by the parent
        said.value = one_line(exc).encode(errors="replace")[: _SAID_BYTES - 1]
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


_SAID_BYTES = 1024  # a worker's error for the parent's line

_FOLLOW_S = 0.25  # while its workers run, this process reads their new trials this often


def _run_workers(prep: Prepared, study: optuna.Study) -> tuple[int, list[str]]:
    """`study.workers` processes forked once, after this process prepared the problem; returns
    how many trials they ran and how each worker that failed ended (`_ended`). They stop with
    this process (signals, or its death).

    On a journal this process follows the study while they run (each reader replays the
    journal line by line): the results rows and exports after them would otherwise wait for a
    replay of every trial the workers wrote, on one core, after the last worker ended. A
    database is read whole each time: nothing to follow there."""
    name = study.study_name
    follow = prep.target.kind == "journal"
    ctx = multiprocessing.get_context("fork")
    counts = [ctx.Value("q", 0) for _ in range(prep.cfg.study.workers)]
    said: list[Any] = [ctx.Array("c", _SAID_BYTES) for _ in range(prep.cfg.study.workers)]
    procs = [ctx.Process(target=_worker_main, args=(prep, name, i, counts[i], said[i]),
                         daemon=True) for i in range(prep.cfg.study.workers)]
    for p in procs:
        p.start()
        assert p.pid is not None
        interrupts.add_child(p.pid)
    for p in procs:
        while p.is_alive():
            p.join(_FOLLOW_S if follow else None)
            if follow:
                # A journal this cannot read yet is reported by the reads after the workers.
                with contextlib.suppress(Exception):
                    study.get_trials(deepcopy=False)
    interrupts.check()
    failed = [_ended(i, p.pid, p.exitcode, said[i].value.decode(errors="replace"))
              for i, p in enumerate(procs) if p.exitcode]
    return sum(int(c.value) for c in counts), failed


def _ended(index: int, pid: int | None, code: int | None, said: str = "") -> str:
    """How a worker that failed ended: killed by a signal, or stopped by the error it said."""
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"stopped: {said}" if said else f"ended with exit code {code}"
    return f"worker {index} (pid {pid}) {how}"


def _fault(prep: Prepared, failed: list[str], study: optuna.Study) -> IpuTuneError:
    """The one line of a run whose workers failed, after its finished trials were stored and
    exported: a fault (exit 1), which running the same command again resumes."""
    done, wanted = count_done(study), prep.cfg.study.n_trials
    disk = next((f for f in failed if "disk error" in f), None)
    again = disk_hint(disk) if disk else "run the same command again to resume"
    kept = (f"all {wanted} trials finished (the other workers ran its trial again), stored "
            "and exported" if done >= wanted else
            f"the {done} of {wanted} trials finished are stored and exported; {again} (it "
            "runs the stopped worker's trial again)")
    return IpuTuneError(
        f"study.workers={prep.cfg.study.workers}: {'; '.join(failed)}; {kept}", fault=True)


def run(cfg: TuneConfig | Prepared, pinned: frozenset[str] = frozenset()) -> RunSummary:
    """Tune: create or resume the study, reach `study.n_trials` finished trials, export.

    `cfg` is a config (prepared here) or the result of `prepare` (not prepared again).
    """
    prep = cfg if isinstance(cfg, Prepared) else prepare(cfg, pinned)
    cfg, pinned = prep.cfg, prep.pinned
    interrupts.defer()  # from here on state is written: a signal stops between trials
    # Created here, once, before any worker starts (no race to create a new database's schema).
    with removing_new_files(prep.target):  # a failed open leaves no empty file behind
        storage = open_storage(prep.target)
        store = ResultsStore(prep.target.results_url)
    try:
        opened = open_study(cfg.study.name, storage, cfg, prep.problem, pinned,
                            prep.target.claims, warm_start=cfg.search.warm_start,
                            workers=cfg.study.workers)
        study = opened.study
        retried = recover_stale_trials(study, storage, prep.target.claims)
        sync_results(store, study)
        interrupts.check()
        started = time.perf_counter()
        failed: list[str] = []
        if cfg.study.workers == 1:
            ran = _work(prep, study, storage, store, progress=cfg.study.progress_bar)
        else:
            ran, failed = _run_workers(prep, study)
        trials_s = time.perf_counter() - started
        if failed:  # its trial is failed now, with its reason, not left RUNNING till a resume
            recover_stale_trials(study, storage, prep.target.claims)
        sync_results(store, study)
        interrupts.check()  # interrupted: no exports (those on disk stay whole)
        summary = export_study(study, prep.problem, store, cfg, prep.target, ran,
                               tuple(retried))
        interrupts.check()
        if failed:  # after the exports: what the other workers finished is not lost
            raise _fault(prep, failed, study)
        return replace(summary, trials_s=trials_s)
    finally:
        store.close()


def _write_set(out_dir: Path, files: dict[Path, str | bytes], cfg: TuneConfig) -> None:
    """The exports and the report as one set: a signal or a full disk leaves the old set or the
    new one; temporaries a killed export left in the folder go first."""
    with folder_lock(out_dir):
        remove_stale_temps(out_dir, (*EXPORT_FILE_NAMES, REPORT_FILE))
        write_files(files, "export path", cfg.results_dir)


def _scored(problem: SearchProblem, cfg: EvalConfig, _: SimResult) -> tuple[list[float], str]:
    """The study's objective values of a plan an export changed, and why it breaks one of the
    study's constraints ("" when it keeps them: `StoredTrials.values`)."""
    outcome = problem.evaluate(cfg)
    return outcome.values, "" if outcome.feasible else outcome.reason


def export_study(
    study: optuna.Study,
    problem: SearchProblem,
    store: ResultsStore,
    cfg: TuneConfig,
    target: StorageTarget,
    ran: int = 0,
    retried: tuple[int, ...] = (),
) -> RunSummary:
    """Write the exports of the best trial (`ipu_tune.exports`) and report.html under
    results/<study>/."""
    # Another storage's study of this name has its own folder; study_dir refuses escaping names.
    out_dir = study_dir(cfg.results_dir, study.study_name, target.export_tag)
    check_stored_trials(problem, study)  # no trial of another problem is exported or shown
    best = problem.best_trial(study)
    objectives = (dict(zip(problem.objective_names, best.values or [], strict=False))
                  if best is not None else {})
    best_cfg, best_result, rendered = None, None, Exports({}, {})
    if best is not None:
        best_cfg = stored_config(problem, record := TrialRecord.of(best), best.number)
        # The result stored with the trial; a plan stored without one is simulated again.
        best_result = record.sim_result() or problem.simulate(best_cfg)
        provenance = Provenance.of(study.study_name, best.number, target.display, objectives,
                                   out_dir, bool(best_cfg.model._target_),
                                   cfg.simulator.constants)
        ctx = export_context(best_cfg, best_result, problem.profile, provenance)
        rendered = prepare_exports(ctx, StoredTrials(
            study.get_trials(deepcopy=False), problem.directions, problem.simulate,
            partial(_scored, problem), rank_key(study, problem.directions)))
    explanation = explain_study(study, problem)
    report = report_bytes(
        study=study,
        results=store.rows(study.study_name),
        best_config=best_cfg,
        best_result=best_result,
        title=f"ipu-tune: {study.study_name}",
        snippet=rendered.texts.get("poptorch"),  # the very text written beside best.yaml
        explanation=explanation,
        best_trial=best.number if best is not None else None,
    )
    exports = {**rendered.files(out_dir), "report": out_dir / REPORT_FILE}
    _write_set(out_dir, {p: rendered.texts.get(n, report) for n, p in exports.items()}, cfg)
    return RunSummary(
        study_name=study.study_name, storage=target.display,
        n_complete=count_done(study), ran_here=ran, retried=retried,
        best_trial=best.number if best is not None else None,
        best_config=best_cfg,
        best_result=best_result,
        exports=exports,
        objectives=objectives,
        convergence=convergence(study, problem.directions, problem.objective_names),
        objective_names=tuple(problem.objective_names),
        changes=(tuple(change_list(best_cfg, problem.codec.user, problem.codec.facts))
                 if best_cfg is not None else ()),
        explanation=explanation,
        stand_ins=rendered.stand_ins,
        model=problem.codec.facts,
    )
