"""A journal storage that writes a finished trial in one durable append.

Optuna's `JournalStorage` appends and fsyncs one line per event: a trial's creation, each
parameter, each attribute, its result (about 19 per trial here). `BatchedJournalStorage` keeps a
RUNNING trial's parameter and attribute writes in memory (reads of the trial see them) and
writes them with the trial's result in one append, through Optuna's own public storage methods
replayed into a batch of `BatchingJournalBackend`.

Crash ordering (what a kill at any point leaves behind):

1. The trial's creation (`create_new_trial`, or taking an enqueued trial) is appended at once,
   under the journal lock, which assigns its number; it is not fsync'd: the page cache keeps it
   through a kill of the process, and the result's fsync below makes it durable too (fsync
   flushes the whole file, every earlier append of every process included).
2. Sampling, simulation, constraints and attributes: in memory only. A kill here leaves the
   trial RUNNING without parameters; recovery fails it (and retries an enqueued plan from its
   `fixed_params`), and a new trial takes its place in the budget.
3. The result (`set_trial_state_values` to a finished state): every parameter, attribute and
   the state in one `write` of several lines, then one fsync; `tell` returns after the fsync.
   A kill before the write leaves case 2; after it, the whole trial. A SIGKILL during the
   write can tear it (Linux stops a write of more than a page at a fatal signal), and so can
   a machine crash: the journal then ends in complete lines of the trial without its state (a
   RUNNING trial recovery fails and retries with its parameters) or a torn line, which the
   next append of any process cuts first, under the lock (`ends_torn`, `repair_locked`),
   so that no append fuses with it. A full disk or a file-size limit during the write cuts
   what it wrote and fails the call: case 2 again, and no torn record.

The lock covers the append, not the disk wait (`BatchingJournalBackend.append_logs`): two
workers' fsyncs overlap, and whichever returns first has made every append before it durable.
Reads of other processes may see an append before it is durable; only a machine crash can take
it back, and then every later append too (a later fsync covers it).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections.abc import Callable, Container, Generator, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from optuna.distributions import BaseDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.storage._journal_lock import FlockLock
from ipu_tune.storage._torn import ends_torn, repair_locked

__all__ = ["BatchedJournalStorage", "BatchingJournalBackend"]


class BatchingJournalBackend(JournalFileBackend):
    """Optuna's journal file, whose appends can be collected into one and whose fsync waits
    outside the lock.

    Inside `batch()` (per thread) appends are kept and reads yield nothing new (the storage
    replays them once the batch is written), then written in one `write` and one fsync; inside
    `unsynced()` each append is written at once without an fsync of its own.
    """

    def __init__(self, file_path: str, lock_obj: FlockLock) -> None:
        super().__init__(file_path, lock_obj=lock_obj)
        self._local = threading.local()
        self.fsyncs = 0  # durable appends made by this backend (benchmarks count them)

    def _pending(self) -> list[dict[str, Any]] | None:
        return getattr(self._local, "pending", None)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Collect this thread's appends; write them as one durable append when the block ends
        without error (an error drops them: nothing of a half-built batch reaches the file)."""
        if self._pending() is not None:  # nested: the outer batch writes
            yield
            return
        self._local.pending = []
        try:
            yield
            logs = self._local.pending
        finally:
            self._local.pending = None
        if logs:
            self._append(logs, True)

    @contextmanager
    def unsynced(self) -> Iterator[None]:
        """This thread's appends go to the file at once, without an fsync of their own."""
        self._local.unsynced = True
        try:
            yield
        finally:
            self._local.unsynced = False

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        if self._pending() is not None:
            return  # mid-batch: the storage catches up once the batch is written
        yield from super().read_logs(log_number_from)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        pending = self._pending()
        if pending is not None:
            pending.extend(logs)
            return
        self._append(logs, not getattr(self._local, "unsynced", False))

    def _append(self, logs: list[dict[str, Any]], durable: bool) -> None:
        data = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        try:
            fd = os.open(self._file_path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:  # read-only, removed: the error names the journal
            raise OSError(exc.errno, exc.strerror, self._file_path) from None
        try:
            self._lock.acquire()
            try:
                if ends_torn(fd):  # its last writer was killed mid-write: cut, then append
                    repair_locked(Path(self._file_path))
                self._write_whole(fd, data)
            finally:
                self._lock.release()
            if durable:
                # Outside the lock: the next worker appends while this one waits for the disk.
                os.fsync(fd)
                self.fsyncs += 1
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, self._file_path) from None
        finally:
            os.close(fd)

    @staticmethod
    def _write_whole(fd: int, data: bytes) -> None:
        """Append `data` whole or not at all (call holding the lock): a full disk or a file-size
        limit mid-write cuts the part written, which would otherwise be a torn record that the
        next append, of any worker, fuses with into a bad line in the middle of the journal."""
        start = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:  # a regular file takes it whole unless the disk is full
                view = view[os.write(fd, view):]
        except OSError:
            with contextlib.suppress(OSError):  # shrinking a file needs no space
                os.ftruncate(fd, start)
            raise


_Op = Callable[[], None]


def _fresh(trial: FrozenTrial) -> FrozenTrial:
    """A shallow copy with dicts of its own: Optuna's `Trial` changes the dicts of the trial it
    read in place, and the journal's read is the replayed trial itself."""
    out = copy.copy(trial)
    out.params = dict(trial.params)
    out.distributions = dict(trial.distributions)
    out.user_attrs = dict(trial.user_attrs)
    out.system_attrs = dict(trial.system_attrs)
    return out


def _rebuilt(cls: type[FrozenTrial], t: FrozenTrial, copy_of: Callable[[Any], Any]) -> FrozenTrial:
    """`t` as a `cls`, its attribute dicts passed through `copy_of`; distributions and values
    are immutable (Optuna never changes a distribution, parameter value or datetime after it
    is made): new dicts of the same objects."""
    return cls(t.number, t.state, None, t.datetime_start, t.datetime_complete, dict(t.params),
               dict(t.distributions), copy_of(t.user_attrs), copy_of(t.system_attrs),
               dict(t.intermediate_values), t._trial_id, values=t.values)


class _ToldTrial(FrozenTrial):
    """A finished trial as `Study.tell` reads it back, only to return a deep copy of it.

    The copy shares the immutable parts (`_rebuilt`) and deep-copies the attributes: copying the
    distributions was 80% of that copy (0.05 of 0.065 ms a trial with 15 knobs;
    benchmarks/tuner_overhead.py), as large as all the tuner's own bookkeeping of a trial. The
    copy is a plain `FrozenTrial`, as `tell` documents.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenTrial:
        return _rebuilt(FrozenTrial, self, lambda v: copy.deepcopy(v, memo))


class BatchedJournalStorage(JournalStorage):
    """`JournalStorage` writing a RUNNING trial's parameters and attributes with its result.

    Only trials this process runs (created RUNNING or taken from the queue here) are held
    back; writes to any other trial (failing a dead worker's) go to the file at once.
    """

    def __init__(self, backend: BatchingJournalBackend) -> None:
        super().__init__(backend)
        self._batching = backend
        self._ops: dict[int, list[_Op]] = {}  # trial id -> its held-back writes, in order
        self._shown: dict[int, FrozenTrial] = {}  # trial id -> the trial with those writes
        self._told: set[int] = set()  # trials finished here whose next read is `tell`'s

    @property
    def fsyncs(self) -> int:
        """Durable appends this storage made (its tests and benchmarks count them)."""
        return self._batching.fsyncs

    # -- claiming: appended at once, not fsync'd (see the module docstring, step 1) --------
    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        running = template_trial is None or template_trial.state == TrialState.RUNNING
        with self._batching.unsynced() if running else nullcontext():
            trial_id = super().create_new_trial(study_id, template_trial)
        if running:
            self._hold(trial_id)
        return trial_id

    def _hold(self, trial_id: int) -> None:
        self._ops[trial_id] = []
        self._shown[trial_id] = _fresh(super().get_trial(trial_id))

    def set_trial_state_values(self, trial_id: int, state: TrialState,
                               values: Sequence[float] | None = None) -> bool:
        if state == TrialState.RUNNING:  # taking an enqueued trial
            with self._batching.unsynced():
                taken = super().set_trial_state_values(trial_id, state, values)
            if taken and trial_id not in self._ops:
                self._hold(trial_id)
            return taken
        ops = self._ops.pop(trial_id, None)
        self._shown.pop(trial_id, None)
        with self._batching.batch():
            for op in ops or ():
                op()
            taken = super().set_trial_state_values(trial_id, state, values)
        super().get_trial(trial_id)  # replay the batch now: its errors belong to this call
        self._told.add(trial_id)
        return taken

    # -- held-back writes ---------------------------------------------------------------
    def _held(self, trial_id: int, op: _Op, change: Callable[[FrozenTrial], None]) -> bool:
        ops = self._ops.get(trial_id)
        if ops is None:
            return False
        ops.append(op)
        shown = copy.copy(self._shown[trial_id])  # `change` gives it new dicts
        change(shown)
        self._shown[trial_id] = shown
        return True

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float,
                        distribution: BaseDistribution) -> None:
        def op() -> None:
            JournalStorage.set_trial_param(self, trial_id, param_name, param_value_internal,
                                           distribution)

        def change(t: FrozenTrial) -> None:
            t.params = {**t.params,
                        param_name: distribution.to_external_repr(param_value_internal)}
            t.distributions = {**t.distributions, param_name: distribution}

        if not self._held(trial_id, op, change):
            op()

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        def op() -> None:
            JournalStorage.set_trial_user_attr(self, trial_id, key, value)

        def change(t: FrozenTrial) -> None:
            t.user_attrs = {**t.user_attrs, key: value}

        if not self._held(trial_id, op, change):
            op()

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        def op() -> None:
            JournalStorage.set_trial_system_attr(self, trial_id, key, value)

        def change(t: FrozenTrial) -> None:
            t.system_attrs = {**t.system_attrs, key: value}

        if not self._held(trial_id, op, change):
            op()

    # -- reads see the held-back writes ----------------------------------------------------
    def get_trial(self, trial_id: int) -> FrozenTrial:
        shown = self._shown.get(trial_id)
        if shown is not None:
            return shown
        if trial_id in self._told:  # `Study.tell` reads it back to deep-copy it
            self._told.discard(trial_id)
            return _rebuilt(_ToldTrial, super().get_trial(trial_id), lambda v: v)
        return super().get_trial(trial_id)

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        trials = super().get_all_trials(study_id, deepcopy=deepcopy, states=states)
        if self._shown:
            for i, t in enumerate(trials):
                shown = self._shown.get(t._trial_id)
                if shown is not None:
                    trials[i] = copy.deepcopy(shown) if deepcopy else shown
        return trials
