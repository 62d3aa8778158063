"""Commands on stored studies: list them, rebuild their exports/report, export their table."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from ipu_tune import interrupts
from ipu_tune.cli._common import (
    OUTPUT_OUTCOME,
    REPORT_OUTCOME,
    TRUST_HELP,
    ArgumentParser,
    fail,
    path_arg,
    print_out,
    printable,
)
from ipu_tune.cli._exported import exported_note
from ipu_tune.cli._studies_differ import what_differs
from ipu_tune.cli._trials_table import (
    column_named,
    filter_rows,
    ranked,
    readable_table,
    trials_frame,
)
from ipu_tune.config import (
    TuneConfig,
    check_path,
    check_storage_path,
    forget_old_defaults,
    typed,
    validate,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import get_key
from ipu_tune.records import StudyMeta
from ipu_tune.storage import (
    ResultsStore,
    StorageTarget,
    csv_text,
    open_storage,
    resolve_storage,
)

if TYPE_CHECKING:
    from ipu_tune.search import SearchProblem

# The tuner, the search, the results store (SQLAlchemy, pandas) and the report (plotly) load
# inside the command that needs them: `studies` lists from the Optuna storage alone.

__all__ = [
    "export_main", "list_main", "readable_table", "report_main", "storage_args", "stored_problem",
    "trials_frame",
]

# A finished trial: COMPLETE (a feasible plan, with values) or PRUNED (infeasible, no value).
_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def _storage_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage", default=None,
        help="storage URL or journal file (default: <results-dir>/ipu_tune.journal)",
    )
    parser.add_argument("--results-dir", default="results", help="default: results")


_NOT_EMPTY = {
    "--storage": "a journal file, sqlite:///FILE, postgresql://USER@HOST/DB or memory; leave "
                 "the flag out for <results-dir>/ipu_tune.journal",
    "--results-dir": "a folder holding ipu_tune.journal; leave the flag out for results",
}


def _target(args: argparse.Namespace) -> StorageTarget:
    for flag, value in (("--storage", args.storage), ("--results-dir", args.results_dir)):
        if value is not None and not value.strip():  # else it read as the default
            raise IpuTuneError(f"{flag}={value!r}: empty; allowed: {_NOT_EMPTY[flag]}")
    check_path("--results-dir", args.results_dir)  # else the first stat raises ENAMETOOLONG
    check_storage_path("--storage", args.storage)
    target = resolve_storage(args.storage, args.results_dir, ("--storage", "--results-dir"))
    if target.kind == "journal" and not Path(target.location).exists():
        if target.given:
            raise IpuTuneError(f"--storage={target.location!r}: no such study storage")
        raise IpuTuneError(f"--results-dir={args.results_dir!r}: no study storage there (no "
                           f"{Path(target.location).name})")
    return target


def list_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(prog="ipu-tune studies", description="List stored studies.")
    _storage_args(parser)
    args = parser.parse_args(list(argv))
    try:
        target = _target(args)
        storage = open_storage(target, read_only=True)
        # The studies without their trials (Optuna's summaries read every trial): a study of a
        # trial that cannot be read is listed as refused, the others as they are.
        summaries = storage.get_all_studies()
        metas = [StudyMeta.of(s) for s in summaries]
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    differs = what_differs(metas)
    # Exports of this storage's studies are in `<name>@<tag>` folders, as the exporter writes them.
    tag = target.export_tag
    print(f"{'study':40} {'model':14} {'system':9} {'trials':>6}  best (objective)")
    for s, meta, differ in zip(summaries, metas, differs, strict=True):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        try:  # an edited database's trial Optuna cannot read: this row says so
            # Finished: COMPLETE (feasible) and PRUNED (infeasible, no value) trials.
            trials = study.get_trials(deepcopy=False, states=_FINISHED)
            shown = _best_shown(study, meta, args.results_dir, tag) if trials else ""
        except IpuTuneError as exc:
            trials, shown = [], f"refused: {exc}"
        system = f"{meta.ipu if meta else '?'}x{meta.num_ipus if meta else '?'}"
        model = meta.model if meta else "?"
        print(f"{printable(s.study_name):40} {printable(model):14} {system:9} "
              f"{len(trials):>6}  {shown}")
        if differ:
            print(f"{'':4}differs: {printable(differ)}")
    return 0


def _best_shown(study: optuna.Study, meta: StudyMeta | None, results_dir: str,
                tag: str) -> str:
    """The trial `report`/`export` would export (a multi-objective study's compromise) and its
    objective values; or why every command on the study refuses it."""
    from ipu_tune.search import OBJECTIVES, best_trial, stored_values_fault

    fault = stored_values_fault(study)
    if fault is not None:  # an edited storage: listed with the reason the other commands give
        return f"refused: {fault}"
    best = best_trial(study, [d.name.lower() for d in study.directions])
    if best is None or not best.values:
        from ipu_tune.explain import no_plan_headline  # only for a study with no plan

        return no_plan_headline(study)
    names = meta.objectives if meta and meta.objectives else []
    if names and all(n in OBJECTIVES for n in names):
        shown = ", ".join(
            f"{OBJECTIVES[n].show(v)} from your plan" if n == "changes"
            else f"{OBJECTIVES[n].title} {OBJECTIVES[n].show(v)}"
            for n, v in zip(names, best.values, strict=False))
    else:
        shown = ", ".join(f"{v:.6g}" for v in best.values)
    return f"trial {best.number}: {shown}" + exported_note(results_dir, study.study_name, tag)


def _load(args: argparse.Namespace) -> tuple[optuna.Study, StorageTarget, TuneConfig]:
    target = _target(args)
    storage = open_storage(target, read_only=True)  # report writes its exports, not the study
    try:
        study = optuna.load_study(study_name=args.study, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage, False)]
        raise IpuTuneError(
            f"study={args.study!r}: not in the storage; stored: {', '.join(names) or 'none'}"
        ) from None
    meta = StudyMeta.of(study)
    if meta is None or meta.config is None:
        raise IpuTuneError(f"study={args.study!r}: was not created by ipu-tune")
    try:  # as the tuner checked it: a value edited into the study is refused as one typed
        stored = forget_old_defaults(meta.config)
        cfg = typed(TuneConfig, {**stored, "results_dir": args.results_dir})
        validate(cfg, check_layout=False)
    except IpuTuneError as exc:
        raise IpuTuneError(f"study={args.study!r}: its stored config: {exc}") from None
    return study, target, cfg


@contextmanager
def stored_problem(args: argparse.Namespace) -> Iterator[tuple[optuna.Study, StorageTarget,
                                                              TuneConfig, SearchProblem]]:
    """The stored study named by `args.study`, its config and its search problem, for the
    block: within it, the config.json the study names reads as the study kept it (profiling,
    exports), never from the disk.

    Code named by the stored config (`model._target_`) runs only with --trust-remote-code."""
    from ipu_tune.case import build_system
    from ipu_tune.models import kept_config_files, profile_model
    from ipu_tune.search import HF_CONFIG_FILE, SearchProblem, check_stored_values

    study, target, cfg = _load(args)
    check_stored_values(study)  # before anything ranks its trials
    if cfg.model._target_ and not getattr(args, "trust_remote_code", False):
        raise IpuTuneError(
            f"model._target_={cfg.model._target_[:80]!r} of study {args.study!r}: code named "
            "in a stored study runs only with --trust-remote-code"
        )
    meta = StudyMeta.of(study)
    pinned = frozenset(meta.pinned if meta else [])
    stored = _stored_files(args.study, cfg, meta)
    kept = ({str(cfg.model.hf.config_file): stored[HF_CONFIG_FILE]}
            if HF_CONFIG_FILE in stored else {})
    with kept_config_files(kept, f"as study {args.study!r} kept it"):
        problem = SearchProblem(cfg, profile_model(cfg.model), build_system(cfg),
                                pinned=pinned, stored=stored)
        _check_inputs(args.study, meta, problem)
        yield study, target, cfg, problem


def _stored_files(name: str, cfg: TuneConfig, meta: StudyMeta | None) -> dict[str, Any]:
    """What the files the stored config names held, as the study kept it: a file a stored
    study names is never opened (whoever writes the storage would choose which file of the
    reader's is read, and its keys would show in the errors)."""
    from ipu_tune.search import files_named

    kept = meta.files if meta else {}
    for key in files_named(cfg):
        if key not in kept:
            raise IpuTuneError(
                f"study={name!r}: its config names {key}={get_key(cfg, key)!r}, a file whose "
                "values the study does not keep (made by an earlier ipu-tune), and the "
                "commands on a stored study open no file its config names; allowed: tune "
                "again with the study's command, which keeps them")
    return {key: kept[key] for key in files_named(cfg)}


def _check_inputs(name: str, meta: StudyMeta | None, problem: SearchProblem) -> None:
    """Refuse to explain or export a study whose model or constants file changed since its
    trials ran: they were scored on what it was then (a study older than the digests passes)."""
    from ipu_tune.simulator import SIMULATOR_VERSION
    from ipu_tune.tuner import problem_inputs

    stored = meta.inputs if meta else {}
    changed = [k for k, v in problem_inputs(problem).items() if k in stored and stored[k] != v]
    version = meta.simulator_version if meta else None
    if changed and version not in (None, SIMULATOR_VERSION):
        raise IpuTuneError(
            f"study={name!r}: its trials were scored by simulator {version}; this ipu-tune "
            f"(simulator {SIMULATOR_VERSION}) reads its {' and '.join(changed)} otherwise; "
            f"allowed: tune again with the study's command, which starts "
            f"a study for simulator {SIMULATOR_VERSION}, or the ipu-tune of simulator {version}")
    if changed:
        raise IpuTuneError(
            f"study={name!r}: {' and '.join(changed)} changed since its trials ran (a file the "
            "config names was edited, or a library traces the model otherwise); allowed: the "
            "files as they were, or tune again for a study of the new model")


def storage_args(parser: argparse.ArgumentParser) -> None:
    """--storage, --results-dir and --trust-remote-code of the commands on a stored study."""
    _storage_args(parser)
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)


def report_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune report",
        description="Rebuild best.yaml, the PopTorch snippet and report.html of a stored study.",
    )
    parser.add_argument("study")
    _storage_args(parser)
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)
    args = parser.parse_args(list(argv))
    interrupts.outcome(REPORT_OUTCOME)
    from ipu_tune.tuner import export_study

    try:
        with stored_problem(args) as (study, target, cfg, problem):
            store = _synced_store(target.results_url, study)
            try:
                summary = export_study(study, problem, store, cfg, target)
            finally:
                store.close()
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    for label, path in summary.exports.items():
        print(f"{label}: {path}")
    return 0


def export_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune export", description="Export a study's results table to Parquet or CSV."
    )
    parser.add_argument("study")
    parser.add_argument("--output", required=True, type=path_arg,
                        help="FILE.parquet or FILE.csv")
    _storage_args(parser)
    args = parser.parse_args(list(argv))
    interrupts.outcome(OUTPUT_OUTCOME)
    from ipu_tune.search import check_stored_cases
    from ipu_tune.storage import export_table

    try:
        study, target, cfg = _load(args)
        check_stored_cases(cfg, study)  # no row of another model or system is exported
        store = _synced_store(target.results_url, study)
        try:
            path = export_table(store.frame(study.study_name), Path(args.output),
                                study.metric_names or ())
        finally:
            store.close()
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    print(f"table: {path}")
    return 0


def _synced_store(url: str, study: optuna.Study) -> ResultsStore:
    """The results table holding every finished trial of `study`. A table that cannot be
    written (a read-only results folder) is read as a copy in memory: the rows are made from
    the study, which the table only copies (`ipu_tune.results`)."""
    from ipu_tune.errors import disk_fault
    from ipu_tune.results import sync_results

    store: ResultsStore | None = None
    try:
        store = ResultsStore(url)
        sync_results(store, study)
        return store
    except Exception as exc:
        if store is not None:
            store.close()
        # Opening SQLite's WAL in a read-only folder says "unable to open database file".
        if disk_fault(exc) is None and "unable to open database file" not in str(exc):
            raise
    store = ResultsStore("sqlite:///:memory:")
    sync_results(store, study)
    return store


def trials_main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune trials",
        description="A stored study's finished trials as a table: the best N by the objective, "
                    "or sorted by any column, filtered.",
    )
    parser.add_argument("study")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="rows shown (default 20)")
    parser.add_argument("--sort", metavar="COLUMN",
                        help="sort by this column (default: the objective, best first)")
    parser.add_argument("--ascending", action="store_true", help="sort smallest first")
    parser.add_argument("--where", action="append", default=[], metavar="COLUMN<op>VALUE",
                        help="keep rows where e.g. 'precision=16.16', 'samples/s>5000' (a "
                             "column by its name, its name without the unit, or its unit; "
                             "repeatable)")
    parser.add_argument("--fits", action="store_true", help="only feasible trials")
    parser.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    storage_args(parser)
    args = parser.parse_args(list(argv))
    try:
        if args.top < 1:
            raise IpuTuneError(f"--top={args.top}: must be >= 1")
        with stored_problem(args) as (study, _, _, problem):
            df = trials_frame(study, problem)
        if df.empty:
            print(f"study {study.study_name}: no finished trial")
            return 0
        if args.fits:
            df = df[df["feasible"]]
        for spec in args.where:
            df = filter_rows(df, spec)
        if args.sort is not None:  # "" names no column: refused, not ignored
            sort = column_named(df, args.sort, f"--sort={args.sort!r}")
            df = df.sort_values(sort, ascending=args.ascending, kind="stable")
        else:
            df = ranked(df, study, problem)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    df = df.head(args.top)
    if args.csv:
        return print_out(csv_text(df).rstrip("\n"))
    return print_out(readable_table(df.drop(columns=["reason"])))
