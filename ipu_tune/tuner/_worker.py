"""One worker's trial loop: exact totals across workers, attributes before tell, then a row.

Order per trial (what a kill at any point leaves behind):
1. ask and tag the trial with its worker, under the shared claim lock (a resume fails and
   retries a RUNNING trial of a dead worker, tagged or not);
2. simulate, store constraints, then config and result in one user attribute;
3. tell (`ipu_tune.search.tell_outcome`): COMPLETE with its values when the plan is feasible,
   PRUNED without a value when it is not (a kill before this leaves it RUNNING: failed and
   retried on resume);
4. queue the results row; queued rows go in one statement about once a second and when the
   loop ends (a kill before that is repaired by `ResultsStore.sync`, which `run` calls on
   every start and end: the study is the record, the table a copy).

Per trial the loop reads the study's trials once (the slot check before ask), filtered by
state without copies; the rank after ask is read only for a trial numbered past the budget
(its rank is at most its number). The progress bar reuses the first read.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from ipu_tune.config import to_plain_dict
from ipu_tune.errors import IpuTuneError
from ipu_tune.records import TrialRecord, result_payload
from ipu_tune.results import ResultsStore
from ipu_tune.search import SearchProblem, refine_study, tell_outcome
from ipu_tune.storage import ClaimLock
from ipu_tune.tuner._worker_id import this_worker

__all__ = ["count_done", "work"]

_ALIVE = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING, TrialState.PRUNED)
_DONE = (TrialState.COMPLETE, TrialState.PRUNED)
_FLUSH_S = 1.0  # results rows are written at most this long after their trial finished


def count_done(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def _rank(alive: list[FrozenTrial], number: int) -> int:
    """Trials not failed that precede `number`: only the first n_trials of them may run."""
    return sum(1 for t in alive if t.number < number)


def _best_label(study: optuna.Study, problem: SearchProblem) -> str:
    best = problem.best_trial(study)
    if best is None or best.values is None:
        return "no plan fits yet"
    name = problem.objective_names[0]
    return f"best {name} {problem.show_value(name, best.values[0])}"


def work(
    study: optuna.Study,
    problem: SearchProblem,
    store: ResultsStore,
    claims: ClaimLock,
    n_trials: int,
    timeout_s: float | None = None,
    progress: bool = False,
    on_trial: Callable[[int], None] | None = None,
    refine: bool = True,
) -> int:
    """Run trials until the study holds `n_trials` finished ones; return how many ran here.

    `refine`: this worker also runs the local search after its trials (`refine_study`). One
    worker per command does: the others keep sampling while it climbs, instead of waiting
    for the study-wide lock to climb again from the same trials.
    """
    started = time.monotonic()
    worker = this_worker()
    ran = 0
    bar = None
    if progress:
        bar = tqdm(total=n_trials, initial=count_done(study), file=sys.stderr,
                   desc="trials", dynamic_ncols=True, leave=True)
        bar.set_postfix_str(_best_label(study, problem))
    last_label = last_flush = time.monotonic()
    rows: list[FrozenTrial] = []  # finished trials whose results rows are not written yet
    try:
        while True:
            if timeout_s is not None and time.monotonic() - started >= timeout_s:
                break
            busy = study.get_trials(
                deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
            )
            if len(busy) >= n_trials:
                break
            with claims.claiming():
                trial = study.ask()
                TrialRecord.tag_worker(trial, worker)
            # A trial's rank is at most its number: only a number past the budget needs the
            # read (resumed studies with failed trials, or another worker took the last slot
            # between our check and ask).
            if trial.number >= n_trials and _rank(
                    study.get_trials(deepcopy=False, states=_ALIVE), trial.number) >= n_trials:
                TrialRecord.tag_surplus(trial)
                study.tell(trial, state=TrialState.FAIL)
                break
            outcome = problem.run_trial(trial)  # also records the constraints on the trial
            TrialRecord.write_plan(trial, to_plain_dict(outcome.config),
                                  result_payload(outcome.result))
            frozen = tell_outcome(study, trial, outcome)
            if frozen.state in _DONE:  # rows are for finished trials only
                rows.append(frozen)
                if refine:
                    # Local search enqueues better plans; under the study-wide lock so that
                    # two commands' workers climbing to the same optimum do not both enqueue it.
                    with claims.recovering():
                        refine_study(study, problem, n_trials)
            if rows and time.monotonic() - last_flush >= _FLUSH_S:
                store.append_many(study.study_name, rows)
                rows, last_flush = [], time.monotonic()
            ran += 1
            if on_trial is not None:
                on_trial(trial.number)
            if bar is not None:
                # The trials finished before our check, plus ours (others' since: next update).
                bar.n = min(sum(1 for t in busy if t.state in _DONE) + 1, n_trials)
                if time.monotonic() - last_label > 0.5:
                    bar.set_postfix_str(_best_label(study, problem))
                    last_label = time.monotonic()
                bar.refresh()
    finally:
        if rows:
            # On the way out of an error too; if the store fails here, the original error is
            # the one to report and `ResultsStore.sync` rebuilds these rows on the next start.
            with contextlib.suppress(IpuTuneError, OSError, RuntimeError):
                store.append_many(study.study_name, rows)
        if bar is not None:
            bar.n = min(count_done(study), n_trials)
            bar.set_postfix_str(_best_label(study, problem))
            bar.close()
    return ran
