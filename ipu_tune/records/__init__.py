"""What ipu-tune keeps on an Optuna trial and study: the only place their attribute names appear.

A finished trial carries (user attributes, written before `tell`, so a trial and its results row
can always be rebuilt from the study):

- ``worker``: the worker that claimed it (host:pid:start, see `ipu_tune.tuner`), on a
  database server only (on one machine a worker's locked file records it, no write here:
  `ipu_tune.storage.ClaimLock.running_file`);
- ``plan``: one attribute (one storage write) holding ``config``, the full plan it stands for
  (plain dict of the config schema), and ``result``, the simulated figures the results row
  needs and, for a feasible plan, the whole result the exports need, as one JSON text (Optuna
  deep-copies trials; a text is copied by reference, a nested dict was the largest cost of the
  trial loop: `benchmarks/tuner_overhead.py`); parsed when read (a nested dict is read alike);
- ``constraints``: one value per constraint, <= 0 feasible, on Optuna < 5 (native on the trial
  since Optuna 5, `Trial.set_constraint`, and only there: one write per trial fewer);
- ``infeasible_reason``, ``changes``: why it is infeasible; knobs changed (`fit` search);
- ``surplus``: claimed past `study.n_trials` by a racing worker (failed at once);
- ``retry_of``, ``retries``: the number of the dead worker's trial it repeats, and how many
  times its plan has been retried (at most `MAX_RETRIES`);
- ``origin``: where an enqueued plan came from (``local search from trial 12``).

The study carries ``ipu_tune`` (`StudyMeta`): its model, system, search, objectives, pins and
whole config.

Optuna-version differences (constraints native on the trial since Optuna 5, in system
attributes before) are handled here and nowhere else.
"""

from ipu_tune.records._study import STUDY_META_KEY, StudyMeta, next_worker_slot
from ipu_tune.records._trial import (
    MAX_RETRIES,
    TrialRecord,
    fail_trial,
    native_constraints,
    result_payload,
    retry_dead_trial,
    user_attr_constraints,
)

__all__ = [
    "MAX_RETRIES",
    "STUDY_META_KEY",
    "StudyMeta",
    "TrialRecord",
    "fail_trial",
    "native_constraints",
    "next_worker_slot",
    "result_payload",
    "retry_dead_trial",
    "user_attr_constraints",
]
