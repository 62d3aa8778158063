"""Commands on stored studies: list them, rebuild their exports/report, export their table."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import optuna
from optuna.trial import TrialState

from ipu_tune.case import build_system
from ipu_tune.cli._common import TRUST_HELP, fail
from ipu_tune.config import TuneConfig, typed
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import profile_model
from ipu_tune.records import StudyMeta, TrialRecord
from ipu_tune.results import ResultsStore, export_table
from ipu_tune.search import SearchProblem
from ipu_tune.storage import StorageTarget, open_storage, resolve_storage
from ipu_tune.tuner import export_study

__all__ = ["export_main", "list_main", "report_main"]


def _storage_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage", default=None,
        help="storage URL or journal file (default: <results-dir>/ipu_tune.journal)",
    )
    parser.add_argument("--results-dir", default="results", help="default: results")


def _target(args: argparse.Namespace) -> StorageTarget:
    target = resolve_storage(args.storage, args.results_dir)
    if target.kind == "journal" and not Path(target.location).exists():
        raise IpuTuneError(f"--storage={target.location!r}: no such study storage")
    return target


def list_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="ipu-tune studies", description="List stored studies.")
    _storage_args(parser)
    args = parser.parse_args(list(argv))
    try:
        storage = open_storage(_target(args))
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    except IpuTuneError as exc:
        return fail(str(exc))
    print(f"{'study':40} {'model':14} {'system':9} {'trials':>6} {'best':>12}")
    for s in summaries:
        meta = StudyMeta.of(s)
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        feasible = [t for t in trials if TrialRecord.of(t).feasible]
        objective = (meta.objectives if meta and meta.objectives else ["value"])[0]
        best = ""
        if feasible and s.directions:
            pick = max if s.directions[0].name == "MAXIMIZE" else min
            best = f"{pick(t.values[0] for t in feasible if t.values):.6g}"
        system = f"{meta.ipu if meta else '?'}x{meta.num_ipus if meta else '?'}"
        model = meta.model if meta else "?"
        print(f"{s.study_name:40} {model!s:14} {system:9} {len(trials):>6} "
              f"{best:>12} {objective if best else ''}")
    return 0


def _load(args: argparse.Namespace) -> tuple[optuna.Study, StorageTarget, TuneConfig]:
    target = _target(args)
    storage = open_storage(target)
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
    cfg = typed(TuneConfig, dict(meta.config))
    cfg.results_dir = args.results_dir
    return study, target, cfg


def report_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ipu-tune report",
        description="Rebuild best.yaml, the PopTorch snippet and report.html of a stored study.",
    )
    parser.add_argument("study")
    _storage_args(parser)
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)
    args = parser.parse_args(list(argv))
    try:
        study, target, cfg = _load(args)
        if cfg.model._target_ and not args.trust_remote_code:
            raise IpuTuneError(
                f"model._target_={cfg.model._target_[:80]!r} of study {args.study!r}: code named "
                "in a stored study runs only with --trust-remote-code"
            )
        profile = profile_model(cfg.model)
        system = build_system(cfg)
        meta = StudyMeta.of(study)
        pinned = frozenset(meta.pinned if meta else [])
        problem = SearchProblem(cfg, profile, system, pinned=pinned)
        store = ResultsStore(target.results_url)
        try:
            store.sync(study)
            summary = export_study(study, problem, store, cfg, target)
        finally:
            store.close()
    except IpuTuneError as exc:
        return fail(str(exc))
    for label, path in summary.exports.items():
        print(f"{label}: {path}")
    return 0


def export_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ipu-tune export", description="Export a study's results table to Parquet or CSV."
    )
    parser.add_argument("study")
    parser.add_argument("--output", required=True, type=Path, help="FILE.parquet or FILE.csv")
    _storage_args(parser)
    args = parser.parse_args(list(argv))
    try:
        study, target, _ = _load(args)
        store = ResultsStore(target.results_url)
        try:
            store.sync(study)
            path = export_table(store.frame(study.study_name), args.output)
        finally:
            store.close()
    except IpuTuneError as exc:
        return fail(str(exc))
    print(f"table: {path}")
    return 0
