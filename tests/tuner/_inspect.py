"""Read a study and its results table as a test (or a user) would after the fact."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from ipu_tune.storage import ResultsStore, open_storage, resolve_storage


def study_state(results: Path, name: str, storage: str | None = None) -> dict[str, object]:
    target = resolve_storage(storage, str(results))
    study = optuna.load_study(study_name=name, storage=open_storage(target))
    store = ResultsStore(target.results_url)
    try:
        rows = store.frame(name)
    finally:
        store.close()
    trials = study.get_trials(deepcopy=False)
    return {
        # Finished: COMPLETE (feasible) or PRUNED (infeasible, no value), both with a row.
        "complete": {t.number for t in trials
                     if t.state in (TrialState.COMPLETE, TrialState.PRUNED)},
        "running": {t.number for t in trials if t.state == TrialState.RUNNING},
        "waiting": {t.number for t in trials if t.state == TrialState.WAITING},
        "numbers": [t.number for t in trials],
        "rows": sorted(rows["trial_number"].tolist()),
        "study": study,
    }
