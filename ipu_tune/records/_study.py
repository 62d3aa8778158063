"""A study's attributes: what ipu-tune keeps on an Optuna study (`ipu_tune.records`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna

from ipu_tune.errors import IpuTuneError, shown
from ipu_tune.records._trial import TrialRecord

__all__ = ["STUDY_META_KEY", "StudyMeta", "next_worker_slot"]

STUDY_META_KEY = "ipu_tune"
_WORKER_SLOTS = "ipu_tune_workers"  # study attribute: workers that ever opened the study


@dataclass(frozen=True)
class StudyMeta:
    """What a study created by ipu-tune carries (its ``ipu_tune`` user attribute)."""

    model: str | None
    ipu: str | None
    num_ipus: int | None
    search: str | None
    objectives: list[str]
    pinned: list[str]
    config: Mapping[str, Any] | None  # the whole TuneConfig (storage URL removed)
    # Fields a study older than them lacks (None, empty). The simulator that scored its trials
    # (else each trial's own, in its result).
    simulator_version: str | None = None
    # Digests of what the problem reads besides the config's values (`problem_inputs` in
    # ipu_tune.tuner): the model as profiled, a constants file's values.
    inputs: Mapping[str, str] = field(default_factory=dict)
    # What the files the config names held, by the key naming each (`files_read`): the
    # commands on a stored study read these and never open a file a stored config names.
    files: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, study: optuna.Study | Any) -> StudyMeta | None:
        """The study's metadata (None: not created by ipu-tune). Also takes a StudySummary."""
        raw = study.user_attrs.get(STUDY_META_KEY)
        if not isinstance(raw, Mapping):
            return None
        _check_fields(study.study_name, raw)
        config, inputs, files = (raw.get(k) for k in ("config", "inputs", "files"))
        return cls(model=raw.get("model"), ipu=raw.get("ipu"), num_ipus=raw.get("num_ipus"),
                   search=raw.get("search"), objectives=list(raw.get("objectives") or []),
                   pinned=list(raw.get("pinned") or []), simulator_version=_version_of(
                       study, raw), config=config if isinstance(config, Mapping) else None,
                   inputs=dict(inputs) if isinstance(inputs, Mapping) else {},
                   files=dict(files) if isinstance(files, Mapping) else {})

    def write(self, study: optuna.Study) -> None:
        study.set_user_attr(STUDY_META_KEY, {
            "model": self.model, "ipu": self.ipu, "num_ipus": self.num_ipus,
            "search": self.search, "objectives": list(self.objectives),
            "pinned": list(self.pinned),
            "config": dict(self.config) if self.config is not None else None,
            "simulator_version": self.simulator_version,
            "inputs": dict(self.inputs), "files": dict(self.files),
        })


def _check_fields(name: str, raw: Mapping[str, Any]) -> None:
    """Refuse, in one line, fields of another type than ipu-tune writes (a study edited by
    hand): the commands would fail on them far from here."""
    for key, ok, allowed in (
        ("objectives", _names, "a list of objective names"),
        ("pinned", _names, "a list of config keys"),
        ("num_ipus", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
         "an integer"),
        *((k, lambda v: v is None or isinstance(v, str), "a string") for k in
          ("model", "ipu", "search")),
    ):
        if not ok(raw.get(key)):
            raise IpuTuneError(f"study={name!r}: its stored {STUDY_META_KEY}.{key}="
                               f"{shown(raw.get(key))}: allowed: {allowed}, as ipu-tune "
                               "writes it (the study was edited by hand)")


def _names(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _version_of(study: optuna.Study | Any, raw: Mapping[str, Any]) -> str | None:
    """The study's simulator version; for a study older than the field, the version stored
    with its first trial that has one (a StudySummary has no trials: None)."""
    found = raw.get("simulator_version")
    if isinstance(found, str) or not hasattr(study, "get_trials"):
        return found if isinstance(found, str) else None
    for trial in study.get_trials(deepcopy=False):
        version = TrialRecord.of(trial).result.get("simulator_version")
        if isinstance(version, str):
            return version
    return None


def next_worker_slot(study: optuna.Study) -> int:
    """This worker's index among the study's workers (0 for the first), counted on the study.
    Call under the storage's study-wide lock (`ClaimLock.recovering`): read, then increment."""
    slot = study.user_attrs.get(_WORKER_SLOTS, 0)
    slot = slot if isinstance(slot, int) else 0
    study.set_user_attr(_WORKER_SLOTS, slot + 1)
    return slot
