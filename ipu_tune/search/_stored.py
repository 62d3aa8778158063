"""A stored trial's config, read only when it is one of its study's plans.

A study in a shared storage is anyone's to write: a trial can carry any config in its `plan`
attribute (`ipu_tune.records`), another model (`model._target_` naming code the exports would
import), another system or workload. Every reader of stored configs (the exports, the report,
`explain`, `trials`) reads them through here: a trial's config must decode from the study's
own search (`Codec.encode`: the model, the system and every key the search does not draw are
the study's, the drawn ones within its space), else the study is refused in one line naming
the trial, the key and both values, before anything of it is exported or shown.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from ipu_tune.config import (
    EvalConfig,
    forget_old_defaults,
    load_config,
    load_unvalidated,
    to_plain_dict,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import shown
from ipu_tune.records import TrialRecord

if TYPE_CHECKING:
    from ipu_tune.search._problem import SearchProblem

__all__ = [
    "check_stored_cases", "check_stored_trials", "check_stored_values", "stored_config",
    "stored_values_fault",
]

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
_ALLOWED = ("allowed: trials of the study's own problem (its model, its system and every key its "
            "search does not draw as the study has them; anyone who writes to a shared storage "
            "can add a trial)")


def _flat(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _flat(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def _first_difference(got: EvalConfig, want: EvalConfig,
                      sections: tuple[str, ...] = ()) -> tuple[str, Any, Any] | None:
    """The first key (of `sections`; all: none given) whose value differs, with both values."""
    mine, theirs = dict(_flat(to_plain_dict(got))), dict(_flat(to_plain_dict(want)))
    for key, value in mine.items():
        if (not sections or key.split(".")[0] in sections) and theirs.get(key) != value:
            return key, value, theirs.get(key)
    return None


def _as_stored(model: Any) -> Any:
    """A model section as a trial's stored config holds it (JSON: every key a string)."""
    return json.loads(json.dumps(to_plain_dict(model), sort_keys=True, default=str))


def _yaml(value: Any) -> str:
    """A value as YAML says it (null, not None)."""
    return "null" if value is None else shown(value)


def _foreign(base: EvalConfig, cfg: EvalConfig, problem: SearchProblem | None) -> str | None:
    """Why `cfg` is no plan of `problem`'s search (None: it is one); no `problem`: why its
    model or system is not `base`'s (None: they are)."""
    if problem is not None and problem.codec.encode(cfg) is not None:
        return None
    # The sections the search never draws first, then the keys a nearest drawn plan differs in.
    found = _first_difference(cfg, base, ("model", "system"))
    if found is not None:
        key, value, want = found
        return f"{key}={_yaml(value)} where the study has {_yaml(want)}"
    if problem is None:
        return None
    codec = problem.codec
    near = codec.encode(cfg, exact=False)
    found = _first_difference(cfg, codec.decode(near).config) if near is not None else None
    if found is None:
        return "a plan (replicas, pipeline splits) this study's search does not draw"
    # The nearest plan's value is one the search draws, not a value the study stored.
    key, value, want = found
    return (f"{key}={_yaml(value)}, a value this study's search does not draw (its nearest "
            f"plan has {_yaml(want)})")


def stored_config(problem: SearchProblem, record: TrialRecord, number: int,
                  whole: bool = True) -> EvalConfig:
    """The config trial `number` stored (`record`), once checked to be a plan of `problem`;
    not `whole`: only its model and system are checked (a listing of the trials shows their
    other keys as stored: a study stored before its space file counted holds trials of two
    modes). Nothing it names is imported: the check compares values only."""
    return _checked(problem.codec.base, record, number, problem if whole else None)


def _checked(base: EvalConfig, record: TrialRecord, number: int,
             problem: SearchProblem | None) -> EvalConfig:
    """`stored_config`, against `problem`'s search or, without one, `base`'s model and system."""
    plain = forget_old_defaults(record.config) if record.config else record.config
    where = f"trial {number}"
    if not plain:
        raise IpuTuneError(f"{where} is not this study's: it stored no config (no `plan` "
                           f"attribute); {_ALLOWED}")
    try:
        cfg = load_config(dict(plain)) if problem is not None else load_unvalidated(dict(plain))
    except IpuTuneError as exc:
        raise IpuTuneError(f"{where} is not this study's: its stored config is no valid "
                           f"config ({exc}); {_ALLOWED}") from None
    if cfg.system.servers == base.system.servers:
        # `hosts` as the servers it means (null on 2 IPUs is 1), as `hosts_as_servers` has it.
        cfg.system.hosts = base.system.hosts
    if _as_stored(cfg.model) == _as_stored(base.model):
        # A model as JSON stores it: a Transformers config's `id2label: {0: a}` comes back
        # with the key "0", the same model.
        cfg.model = base.model
    why = _foreign(base, cfg, problem)
    if why is not None:
        raise IpuTuneError(f"{where} is not this study's: it stored {why}; {_ALLOWED}")
    return cfg


def check_stored_values(study: optuna.Study) -> None:
    """Refuse `study`, in one line naming the first such trial, when a finished trial's
    objective values are not all numbers (`stored_values_fault`)."""
    fault = stored_values_fault(study)
    if fault is not None:
        raise IpuTuneError(f"study={study.study_name!r}: {fault}")


def stored_values_fault(study: optuna.Study) -> str | None:
    """Why `study`'s stored objective values cannot be ranked (None: they can): Optuna fails
    a trial whose objective is NaN, so only an edited storage holds one (or a null, or a
    string), which every ranking of the trials would read."""
    for trial in study.get_trials(deepcopy=False, states=_FINISHED):
        if any(not isinstance(v, int | float) or math.isnan(v) for v in trial.values or ()):
            return (f"trial {trial.number} stored the objective values {trial.values}, which "
                    "no trial of Optuna's holds (it fails a NaN one); allowed: numbers")
    return None


def check_stored_trials(problem: SearchProblem, study: optuna.Study, whole: bool = True) -> None:
    """Refuse `study`, in one line naming the first such trial, when a finished trial stored a
    config that is no plan of `problem` (`stored_config`)."""
    _check_all(problem.codec.base, problem if whole else None, study)


def check_stored_cases(base: EvalConfig, study: optuna.Study) -> None:
    """`check_stored_trials` of the model and system only, against `base` (the study's own
    config): for a reader of figures only (`export --output`), which profiles no model."""
    _check_all(base, None, study)


def _check_all(base: EvalConfig, problem: SearchProblem | None, study: optuna.Study) -> None:
    check_stored_values(study)
    for trial in study.get_trials(deepcopy=False, states=_FINISHED):
        record = TrialRecord.of(trial)
        if not record.config:  # nothing of it is read (a row of its figures, at most)
            continue
        try:
            _checked(base, record, trial.number, problem)
        except IpuTuneError as exc:
            raise IpuTuneError(f"study={study.study_name!r}: {exc}") from None
