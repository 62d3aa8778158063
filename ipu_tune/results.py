"""The results row of a finished trial, and bringing a study's results table in line with it.

A row is derived from what the trial itself carries in the study (`ipu_tune.records`), so the
table (`ipu_tune.storage.ResultsStore`) can always be rebuilt: `sync_results` inserts the rows
of finished trials that have none yet (a process killed between `tell` and its insert).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.knobs import KNOBS
from ipu_tune.records import TrialRecord
from ipu_tune.storage import ResultsStore

__all__ = ["append_trials", "row_from_trial", "sync_results"]


def row_from_trial(study_name: str, trial: FrozenTrial,
                   plan: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The results row of a finished trial, from the attributes the tuner stored on it
    (`plan`: its plan as `TrialRecord.write_plan` returned it, not parsed again)."""
    record = TrialRecord.of(trial, plan)
    result, config = record.result, record.config
    system = config.get("system", {})
    model = config.get("model", {})
    memory = list(result.get("memory_per_ipu", []))
    row: dict[str, Any] = {
        "study": study_name,
        "trial_number": trial.number,
        "state": trial.state.name,
        # No objective values for an infeasible trial, whatever its state (the samplers that
        # need it tell them COMPLETE: `ipu_tune.search.tell_outcome`).
        "values": (json.dumps(trial.values) if trial.values is not None and record.feasible
                   else None),
        # A plan that does not fit has no throughput (not 0 samples/s).
        "throughput": result.get("throughput") if result.get("fits") else None,
        "latency_s": result.get("latency_s") if result.get("fits") else None,
        "fits": result.get("fits"),
        "feasible": record.feasible,
        "peak_memory_bytes": max(memory) if memory else None,
        "memory_per_ipu": json.dumps(memory),
        "memory_limit_bytes": result.get("memory_limit_bytes"),
        "bottleneck": result.get("bottleneck"),
        "reason": record.reason or result.get("reason"),
        "model": model.get("name") or model.get("_target_"),
        "ipu": system.get("ipu"),
        "num_ipus": system.get("num_ipus"),
        "simulator_version": result.get("simulator_version"),
        "started_at": trial.datetime_start.isoformat() if trial.datetime_start else None,
        "finished_at": trial.datetime_complete.isoformat() if trial.datetime_complete else None,
        "extra": {"constraints": record.constraints},
    }
    for column, path, as_json in _KNOB_COLUMNS:
        value = _lookup(config, path)
        row[column] = json.dumps(list(value or [])) if as_json else value
    return row


# Each knob's column, its path in the config and whether it is stored as JSON: found once (a
# row per finished trial reads them all).
_KNOB_COLUMNS = tuple((k.column, tuple(k.key.split(".")), k.sql == "json") for k in KNOBS)


def _lookup(config: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = config
    for part in path:
        # A stored plan is plain JSON: dicts (a Mapping check costs 5x a dict check).
        node = node.get(part) if isinstance(node, dict) else None
    return node


def append_trials(store: ResultsStore, study_name: str, trials: Sequence[FrozenTrial],
                  plans: Sequence[Mapping[str, Any] | None] | None = None) -> None:
    """The rows of finished trials, in one statement (the tuner batches them); `plans`: each
    trial's plan as written, when the caller has it (`row_from_trial`)."""
    store.insert([row_from_trial(study_name, t, p)
                  for t, p in zip(trials, plans or [None] * len(trials), strict=True)])


def sync_results(store: ResultsStore, study: optuna.Study) -> int:
    """Insert the rows of the study's finished trials that have none yet; return how many.
    The store calls it again when it made its table anew (a damaged file moved aside)."""
    store.refill_with(study.study_name, lambda: sync_results(store, study))
    have = set(store.trial_numbers(study.study_name))
    missing = [
        row_from_trial(study.study_name, t)
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if t.number not in have
    ]
    store.insert(missing)
    return len(missing)
