"""One worker's trial loop: exact totals across workers, attributes before tell, then a row.

Order per trial (what a kill at any point leaves behind):
1. ask and record that this worker runs the trial, under the shared claim lock: in the
   worker's locked file on one machine (`ClaimLock.running_file`, no storage write); on a
   database server its first heartbeat, then a tag on the trial (a resume fails and retries a
   RUNNING trial of a dead worker: untagged by its age, tagged by its stale heartbeat);
2. simulate, store constraints, then config and result in one user attribute (on the journal,
   `ipu_tune.storage.BatchedJournalStorage`, the parameters and attributes stay in this
   process's memory until step 3);
3. tell (`ipu_tune.search.tell_outcome`): COMPLETE with its values when the plan is feasible,
   PRUNED without a value when it is not; on the journal one fsync'd append with the
   parameters and attributes (a kill before this leaves it RUNNING, on the journal without
   parameters: failed on resume, and retried when it was an enqueued plan);
4. queue the results row; queued rows go in one statement about once a second and when the
   loop ends (a kill before that is repaired by `sync_results`, which `run` calls on
   every start and end: the study is the record, the table a copy).

The loop reads the study's trials (filtered by state, without copies) only when it may be
nearly full (`_Slots`: alone on a study, once in 16 trials and for the last three), and the
rank after ask only for a trial numbered past the budget (its rank is at most its number).
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

from ipu_tune.config import to_plain_dict
from ipu_tune.errors import IpuTuneError, one_line
from ipu_tune.records import TrialRecord, result_payload, retry_dead_trial
from ipu_tune.results import append_trials
from ipu_tune.search import SearchProblem, refine_study, tell_outcome
from ipu_tune.storage import ClaimLock, ResultsStore, RunningFile
from ipu_tune.tuner._worker_id import this_worker

__all__ = ["count_done", "work"]

_ALIVE = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING, TrialState.PRUNED)
_DONE = (TrialState.COMPLETE, TrialState.PRUNED)
_BUSY = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
_READ_EVERY = 16  # own trials between two reads of the study at most
_BAR_READ_S = 0.5  # with a progress bar, the study is read at least this often
_FLUSH_S = 1.0  # results rows are written at most this long after their trial finished


def count_done(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def _rank(alive: list[FrozenTrial], number: int) -> int:
    """Trials not failed that precede `number`: only the first n_trials of them may run."""
    return sum(1 for t in alive if t.number < number)


@dataclass
class _Slots:
    """Whether the study is full (`n_trials` finished or running), reading it only when it may be.

    Reading the study costs a pass over all its trials (0.2-0.7 ms at 1,000). Between reads
    the count is estimated: this worker's trials since the last read, each with as many of
    other workers' as it saw per own trial between the last two reads. The study is read when
    that estimate comes within two own trials' worth of the budget, after `_READ_EVERY` own
    trials, and (with a progress bar) every `_BAR_READ_S`. Alone on a study the estimate is
    exact and each of the last three trials reads; with other workers, each of the last few
    does. An estimate short of faster workers only costs a `surplus` trial, which the rank
    check after `ask` catches.
    """

    n_trials: int
    busy: int = 0  # finished or running trials at the last read
    done: int = 0  # finished trials at the last read
    own: int = 0  # trials this worker started since the last read
    per_own: float = 0.0  # other workers' trials per own trial between the last two reads
    read_at: float = -math.inf

    def full(self, study: optuna.Study, fresh: bool = False) -> bool:
        first = self.read_at == -math.inf
        step = 1.0 + self.per_own  # trials started per own trial, ours included
        estimate = self.busy + self.own * step
        if (not first and self.own < _READ_EVERY and estimate + 2 * step < self.n_trials
                and not (fresh and time.monotonic() - self.read_at >= _BAR_READ_S)):
            return False
        trials = study.get_trials(deepcopy=False, states=_BUSY)
        if not first and self.own:
            self.per_own = max(0, len(trials) - self.busy - self.own) / self.own
        self.busy, self.own, self.read_at = len(trials), 0, time.monotonic()
        self.done = sum(1 for t in trials if t.state in _DONE)
        return self.busy >= self.n_trials


def _best_label(study: optuna.Study, problem: SearchProblem) -> str:
    best = problem.best_trial(study)
    if best is None or best.values is None:
        return ("no plan fits yet" if problem.constraint_names == ["memory"]
                else "no plan meets the search's constraints yet")
    name = problem.objective_names[0]
    return f"best {name} {problem.show_value(name, best.values[0])}"


_LOG_EVERY_S = 30.0  # progress lines when stderr is not a terminal


class _Progress:
    """The trials bar on stderr, with the best value so far; without a bar, nothing."""

    def __init__(self, study: optuna.Study, problem: SearchProblem, n_trials: int,
                 on: bool) -> None:
        self.study, self.problem, self.n_trials = study, problem, n_trials
        self.bar = None
        if on:
            self.bar = tqdm(total=n_trials, initial=count_done(study), file=sys.stderr,
                            desc="trials", dynamic_ncols=True, leave=True)
            self.bar.set_postfix_str(_best_label(study, problem))
        self.last_label = self.last_shown = time.monotonic()
        # Into a log file or a pipe each refresh is a line: one every _LOG_EVERY_S there.
        self.every_s = 0.0 if sys.stderr.isatty() else _LOG_EVERY_S

    def step(self, done: int) -> None:
        """`done`: finished at the last read, plus ours since (others' since: next read)."""
        if self.bar is None:
            return
        self.bar.n = min(done, self.n_trials)
        now = time.monotonic()
        if now - self.last_label > 0.5:
            self.bar.set_postfix_str(_best_label(self.study, self.problem), refresh=False)
            self.last_label = now
        if now - self.last_shown >= self.every_s:
            self.bar.refresh()
            self.last_shown = now

    def close(self) -> None:
        if self.bar is None:
            return
        self.bar.n = min(count_done(self.study), self.n_trials)
        self.bar.set_postfix_str(_best_label(self.study, self.problem))
        self.bar.close()


_Finished = tuple[FrozenTrial, Mapping[str, Any]]  # a finished trial and its plan as written


def _append(store: ResultsStore, study_name: str, rows: list[_Finished]) -> None:
    append_trials(store, study_name, [t for t, _ in rows], [plan for _, plan in rows])


def _claim(study: optuna.Study, claims: ClaimLock, running: RunningFile | None,
           worker: str, claimed: Callable[[int], None]) -> optuna.Trial:
    """A new trial, held in this worker's running file (one machine) or beating and tagged
    with it (`claimed`: its first heartbeat, `ipu_tune.tuner._heartbeat.beating`)."""
    with claims.claiming():
        trial = study.ask()
        if running is not None:
            running.hold(trial.number, study.study_name)
        else:
            claimed(trial.number)
            TrialRecord.tag_worker(trial, worker)
    return trial


def _surplus(study: optuna.Study, trial: optuna.Trial, n_trials: int) -> bool:
    """Fail `trial` when it lies past the budget; True if it did."""
    # A trial's rank is at most its number: only a number past the budget needs the read
    # (resumed studies with failed trials, or another worker took the last slot between our
    # check and ask).
    if trial.number >= n_trials and _rank(
            study.get_trials(deepcopy=False, states=_ALIVE), trial.number) >= n_trials:
        TrialRecord.tag_surplus(trial)
        study.tell(trial, state=TrialState.FAIL)
        return True
    return False


def _not_stored(study: optuna.Study, storage: BaseStorage | None, trial: optuna.Trial,
                running: RunningFile | None, worker: str, exc: Exception) -> None:
    """The trial this worker runs was not stored (a full disk, a lost connection, a bug): fail
    it now with the error, not as a worker that died, and enqueue its plan again. When the
    storage takes no write either (a full disk), the worker's running file keeps the error for
    the recovery of the next run (`RunningFile.stopped`)."""
    cause = f"not stored: {one_line(exc)} (worker {worker})"
    try:
        stored = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                  if t.number == trial.number]
        if not stored:
            return  # told before the error (in the local search after it): nothing lost
        # A journal keeps a trial's parameters for its result: the trial object still has them.
        frozen = copy.copy(stored[0])
        frozen.params = stored[0].params or trial.params
        if storage is None:
            raise RuntimeError("no storage to fail it in")
        retry_dead_trial(storage, study, frozen, worker, cause)
    except Exception:  # no write possible (a full disk): the running file keeps the cause
        if running is not None:
            running.stopped(cause)


def _run_trial(study: optuna.Study, problem: SearchProblem, trial: optuna.Trial,
               claims: ClaimLock, n_trials: int, refine: bool,
               not_stored: Callable[[Exception], None]) -> _Finished | None:
    """Simulate, record and tell one trial; the finished trial and its plan as written (None:
    not finished). An error before the trial is told goes to `not_stored` first."""
    try:
        outcome = problem.run_trial(trial)  # also records the constraints on the trial
        plan = TrialRecord.write_plan(trial, to_plain_dict(outcome.config),
                                      result_payload(outcome.result, whole=outcome.feasible))
        frozen = tell_outcome(study, trial, outcome)
    except Exception as exc:  # a full disk, a lost server: said, not left as a dead worker's
        not_stored(exc)
        raise
    if frozen.state not in _DONE:  # rows are for finished trials only
        return None
    if refine and problem.refiner() is not None:  # random and brute force do not refine
        # Local search enqueues better plans; under its own lock so that two commands'
        # workers climbing to the same optimum do not both enqueue it (`enqueue_trial`
        # skips a plan already there), while the other workers keep claiming trials.
        with claims.refining(study.study_name):
            refine_study(study, problem, n_trials)
    return frozen, plan


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
    claimed: Callable[[int], None] = lambda _number: None,
    storage: BaseStorage | None = None,
) -> int:
    """Run trials until the study holds `n_trials` finished ones; return how many ran here.

    `refine`: this worker also runs the local search (`refine_study`); one worker per command
    does, the others keep sampling meanwhile. `claimed(number)`: called for each trial claimed
    on a database server, before its tag (its first heartbeat). `storage`: the study's, where
    a trial this worker cannot store is failed with the error (`_not_stored`).
    """
    started = time.monotonic()
    worker = this_worker()
    ran = 0
    bar = _Progress(study, problem, n_trials, progress)
    last_flush = time.monotonic()
    slots = _Slots(n_trials)
    rows: list[_Finished] = []  # finished trials whose results rows are not written yet
    running = None
    try:
        if claims.local:
            with claims.claiming():
                running = claims.running_file(worker, study.study_name)
        while not (timeout_s is not None and time.monotonic() - started >= timeout_s):
            if slots.full(study, fresh=bar.bar is not None):
                break
            trial = _claim(study, claims, running, worker, claimed)
            slots.own += 1
            if _surplus(study, trial, n_trials):
                break
            finished = _run_trial(study, problem, trial, claims, n_trials, refine,
                                  partial(_not_stored, study, storage, trial, running, worker))
            if finished is not None:
                rows.append(finished)
            if rows and time.monotonic() - last_flush >= _FLUSH_S:
                _append(store, study.study_name, rows)
                rows, last_flush = [], time.monotonic()
            ran += 1
            if on_trial is not None:
                on_trial(trial.number)
            bar.step(slots.done + slots.own)
    finally:
        if running is not None:
            running.close()
        if rows:
            # On the way out of an error too; if the store fails here, the original error is
            # the one to report and `sync_results` rebuilds these rows on the next start.
            with contextlib.suppress(IpuTuneError, OSError, RuntimeError):
                _append(store, study.study_name, rows)
        bar.close()
    return ran
