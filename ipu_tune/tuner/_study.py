"""Create or resume a study: names, compatibility, stale trials of killed workers, warm start."""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ipu_tune.config import TuneConfig, fill_old_defaults, hosts_as_servers, to_plain_dict
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import model_label
from ipu_tune.records import StudyMeta, TrialRecord, next_worker_slot, retry_dead_trial
from ipu_tune.search import SearchProblem, is_space_file, make_sampler
from ipu_tune.simulator import SIMULATOR_VERSION
from ipu_tune.storage import ClaimLock, Held
from ipu_tune.tuner._heartbeat import fail_stale
from ipu_tune.tuner._worker_id import is_alive_here

__all__ = [
    "OpenedStudy",
    "default_study_name",
    "enqueue_warm_start",
    "hashed_study_name",
    "metadata",
    "open_study",
    "parallel_sampler",
    "problem_differences",
    "problem_fingerprint",
    "problem_inputs",
    "recover_stale_trials",
]

# A claim (`ask` + tag) takes milliseconds; an untagged RUNNING trial older than this on a
# shared database server belongs to a dead worker.
_CLAIM_AGE_S = 60.0


# What makes two runs the same problem: the model, workload, system, the starting plan (the
# warm start and the `changes` objective count from it), the sampler (its draws are the
# study's), the simulator constants file, the search preset's definition, and the values of
# the pinned keys.
_PROBLEM_SECTIONS = ("model", "workload", "system", "plan", "sampler", "simulator")
_SEARCH_KEYS = ("name", "space", "objectives", "throughput_floor", "global_batch_size")
_HASH_CHARS = 8
_CARRIED = "plan.ipu_config_carried"
_MAX_DIFFS_SHOWN = 6


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}", out)
    else:
        out[prefix] = list(value) if isinstance(value, list | tuple) else value


def _lookup(plain: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = plain
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return list(cur) if isinstance(cur, list | tuple) else cur


def problem_fingerprint(plain: Mapping[str, Any], pinned: Sequence[str],
                        inputs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The problem a study solves, as flat `key: value` pairs of a plain config dict.

    Two runs are the same study only when these agree: model (name, `_target_`, kwargs, input
    shape, ...), workload, system, the starting plan, the sampler (name, seed, parameters),
    search preset (space, objectives, floor, global batch), each pinned key with its value and
    the digests of what the config names but does not hold (`problem_inputs`).
    The plan values the search draws are not part of it.
    """
    out: dict[str, Any] = dict(inputs or {})
    for section in _PROBLEM_SECTIONS:
        _flatten(plain.get(section) or {}, section, out)
    # What an ipu_config.json's export carries changes no simulated figure (and a study stored
    # before the key existed has none): not part of the problem.
    for key in [k for k in out if k.startswith(_CARRIED)]:
        del out[key]
    search = plain.get("search") or {}
    for key in _SEARCH_KEYS:
        value = search.get(key)
        out[f"search.{key}"] = list(value) if isinstance(value, list | tuple) else value
    for key in sorted(pinned):
        out[key] = _lookup(plain, key)
    out["pinned"] = sorted(pinned)
    return fill_old_defaults(hosts_as_servers(out))


# The model and a constants file enter a study as what they are, not by their names: a config
# file or a factory edited in place, or a library that traces the model otherwise, is another
# problem (the stored trials were scored on the old one).
_MODEL_AS_PROFILED = "model (as profiled)"
_CONSTANTS_READ = "simulator.constants (values)"
_SPACE_READ = "search.space (as read)"


def problem_inputs(problem: SearchProblem) -> dict[str, str]:
    """Digests of the model as profiled (without the torch version that traced it) and, when
    `simulator.constants` names a file, of the constants read from it, and when
    `search.space` names a file, of the space read from it (its knobs, ranges and fixed
    values; not its path, which the config holds). The defaults and the presets are not
    digested: they change only with ipu-tune, whose simulator version a study keeps."""
    out = {_MODEL_AS_PROFILED: _value_digest(replace(problem.profile, torch_version=""))}
    if problem.cfg.simulator.constants:
        out[_CONSTANTS_READ] = _value_digest(problem.constants)
    if is_space_file(problem.cfg.search.space):
        out[_SPACE_READ] = _value_digest(replace(problem.space, source="", name="",
                                                 document={}))
    return out


def _value_digest(value: Any) -> str:
    text = json.dumps(asdict(value), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digest(fingerprint: Mapping[str, Any]) -> str:
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:_HASH_CHARS]


def _base_name(cfg: TuneConfig) -> str:
    return f"{model_label(cfg.model)}-{cfg.system.ipu}x{cfg.system.num_ipus}-{cfg.search.name}"


def default_study_name(cfg: TuneConfig, pinned: frozenset[str] = frozenset()) -> str:
    """`<model>-<ipu>x<num_ipus>-<search>`, plus a short hash of the whole problem when a
    custom `_target_`, model kwargs or pinned plan/workload keys make it another problem
    (the factory's name alone does not tell two factories or two pins apart)."""
    base = _base_name(cfg)
    if cfg.model._target_ or cfg.model.kwargs or pinned:
        return f"{base}-{_digest(problem_fingerprint(to_plain_dict(cfg), sorted(pinned)))}"
    return base


def hashed_study_name(cfg: TuneConfig, pinned: frozenset[str],
                      inputs: Mapping[str, str] | None = None) -> str:
    """The default name when the plain one is taken by another problem (other input shape,
    workload, ...): base name plus the problem's hash. With `inputs`, the hash covers them too:
    the name for a model whose config agrees with a stored study's but whose profile does not."""
    plain = problem_fingerprint(to_plain_dict(cfg), sorted(pinned), inputs)
    return f"{_base_name(cfg)}-{_digest(plain)}"


def metadata(cfg: TuneConfig, problem: SearchProblem, pinned: frozenset[str]) -> StudyMeta:
    # The whole config rides along so that reports and exports can be rebuilt later, and the
    # problem's fingerprint is derived from it (with the pins) whenever the study is resumed.
    plain = to_plain_dict(cfg)
    plain["study"]["storage"] = None  # never keep credentials in the study
    return StudyMeta(
        model=cfg.model._target_ or model_label(cfg.model),
        ipu=cfg.system.ipu,
        num_ipus=cfg.system.num_ipus,
        search=cfg.search.name,
        objectives=list(problem.objective_names),
        pinned=sorted(pinned),
        config=plain,
        simulator_version=SIMULATOR_VERSION,
        inputs=problem_inputs(problem),
        files=problem.files_read,
    )


def problem_differences(stored: StudyMeta, mine: StudyMeta) -> list[str]:
    """`key: stored -> mine` for every fingerprint key the two disagree on.

    Keys one side lacks (a config key added by a newer ipu-tune) count only when pinned.
    """
    if stored.config is None:  # a study older than the stored config: compare what it has
        return [f"model: {stored.model!r} -> {mine.model!r}"] if stored.model != mine.model else []
    assert mine.config is not None
    have = problem_fingerprint(stored.config, stored.pinned, stored.inputs)
    want = problem_fingerprint(mine.config, mine.pinned, mine.inputs)
    diffs = []
    for key in sorted(set(have) | set(want)):
        one_sided = key not in have or key not in want
        if one_sided and key not in stored.pinned and key not in mine.pinned:
            continue
        if have.get(key) != want.get(key):
            diffs.append(f"{key}: {have.get(key)!r} -> {want.get(key)!r}")
    return diffs


def _refusal(name: str, diffs: list[str]) -> IpuTuneError:
    shown = "; ".join(diffs[:_MAX_DIFFS_SHOWN])
    more = f"; and {len(diffs) - _MAX_DIFFS_SHOWN} more" if len(diffs) > _MAX_DIFFS_SHOWN else ""
    return IpuTuneError(
        f"study.name={name!r}: the stored study is another problem ({shown}{more}); choose "
        "another study.name, or leave study.name unset for a name of its own"
    )


@dataclass(frozen=True)
class OpenedStudy:
    study: optuna.Study
    created: bool
    slot: int  # this worker's index among every worker that ever opened the study


def open_study(
    name: str | None,
    storage: BaseStorage,
    cfg: TuneConfig,
    problem: SearchProblem,
    pinned: frozenset[str] = frozenset(),
    claims: ClaimLock | None = None,
    warm_start: bool = False,
    workers: int = 1,
) -> OpenedStudy:
    """Load or create the study of this problem; refuse one of another problem or shape.

    `name=None` takes the default name (hashed when that name holds another problem). Under the
    storage's study-wide lock: creating, checking, the warm start (enqueued once per study, by
    whichever worker creates it) and this worker's slot (which seeds its sampler).
    """
    if isinstance(storage, InMemoryStorage) and workers > 1:
        raise IpuTuneError(f"study.workers={workers}: study.storage=memory lives in one process; "
                           "allowed: study.workers=1, or a journal or database storage")
    key = name or default_study_name(cfg, pinned)  # studies do not wait for each other
    lock = claims.recovering(key) if claims is not None else nullcontext()
    with lock:
        mine = metadata(cfg, problem, pinned)
        study_name = name or default_study_name(cfg, pinned)
        opened = _open_one(study_name, storage, cfg, problem, mine, workers)
        if isinstance(opened, list):  # another problem under that name
            if name is not None:
                raise _refusal(name, opened)
            opened = _open_fallback(study_name, opened, storage, cfg, problem, mine, workers)
        if opened.created and warm_start:
            enqueue_warm_start(opened.study, problem, cfg.study.n_trials)
        return opened


def _open_fallback(taken: str, diffs: list[str], storage: BaseStorage, cfg: TuneConfig,
                   problem: SearchProblem, mine: StudyMeta, workers: int) -> OpenedStudy:
    """The study of an unnamed run whose default name `taken` holds another problem: the same
    problem scored by an older simulator gets a name for this one; otherwise the name hashed
    from the config, then (a model edited in place) from the config and `problem_inputs`."""
    pinned = frozenset(mine.pinned)
    if diffs[0].startswith("simulator_version"):  # the same problem, older scores
        names = [_new_for_this_simulator(taken)]
    else:
        names = [hashed_study_name(cfg, pinned), hashed_study_name(cfg, pinned, mine.inputs)]
    for candidate in (n for n in names if n != taken):
        if all(d.startswith(tuple(mine.inputs)) for d in diffs):
            # The same config, another model or constants: say so, since a worker on another
            # host with other library versions would otherwise split the study silently.
            print(f"ipu-tune: study {taken!r} was run with another "
                  f"{' and '.join(d.partition(':')[0] for d in diffs)} (a file the config names "
                  f"was edited, or other library versions); using study {candidate!r}",
                  file=sys.stderr)
        opened = _open_one(candidate, storage, cfg, problem, mine, workers)
        if not isinstance(opened, list):
            return opened
        taken, diffs = candidate, opened
    raise _refusal(taken, diffs)


def _new_for_this_simulator(name: str) -> str:
    """The name of this problem's study for this simulator version, said on stderr."""
    fresh = f"{name}-sim{SIMULATOR_VERSION}"
    print(f"ipu-tune: study {name!r} holds trials of another simulator version; starting "
          f"study {fresh!r} for simulator {SIMULATOR_VERSION}", file=sys.stderr)
    return fresh


def _open_one(name: str, storage: BaseStorage, cfg: TuneConfig, problem: SearchProblem,
              mine: StudyMeta, workers: int) -> OpenedStudy | list[str]:
    wanted = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
              for d in problem.directions]
    # Load first: the sampler is built once the slot is known.
    probe = optuna.create_study(study_name=name, storage=storage, directions=wanted,
                                load_if_exists=True)
    if list(probe.directions) != wanted:
        have = [d.name.lower() for d in probe.directions]
        return [f"directions: {have} -> {list(problem.directions)}"]
    meta = StudyMeta.of(probe)
    created = meta is None
    if meta is None:
        mine.write(probe)
        # Names with units for optuna-dashboard, the plots and the report.
        with warnings.catch_warnings():  # experimental in Optuna 5; the names are what we want
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            probe.set_metric_names(problem.metric_names)
    else:
        diffs = problem_differences(meta, mine)
        older = meta.simulator_version not in (None, mine.simulator_version)
        # Another simulator's profiler may record a model otherwise (the digests of what the
        # config names then differ with the config the same): the same problem, older scores.
        if diffs and not (older and all(d.startswith(tuple(mine.inputs)) for d in diffs)):
            return diffs
        if older:
            return [f"simulator_version: {meta.simulator_version!r} -> "
                    f"{mine.simulator_version!r} (its trials were scored by another simulator)"]
        if set(mine.files) - set(meta.files):
            # Made before studies kept a file's values: its inputs agree, so these are its own.
            replace(meta, files={**mine.files, **meta.files}).write(probe)
    slot = next_worker_slot(probe)
    study = optuna.load_study(study_name=name, storage=storage,
                              sampler=parallel_sampler(problem, slot, workers, storage))
    return OpenedStudy(study, created, slot)


def parallel_sampler(problem: SearchProblem, slot: int, workers: int,
                     storage: BaseStorage) -> optuna.samplers.BaseSampler:
    """The problem's sampler, made safe for several workers.

    The first worker of a study keeps the configured seed (one worker stays reproducible);
    every other one gets `seed + slot`, or all would draw the same points. With several
    workers TPE uses its constant liar: running trials count as bad, so two workers do not
    sample the same region at once (Optuna's advice for distributed TPE).
    """
    sampler_cfg = problem.cfg.sampler
    shared = workers > 1 or slot > 0 or (isinstance(storage, RDBStorage) and not _is_sqlite(
        storage))
    if not shared:
        return problem.sampler()
    params = dict(sampler_cfg.params)
    if sampler_cfg.name == "tpe":
        params.setdefault("constant_liar", True)
    seed = None if sampler_cfg.seed is None else sampler_cfg.seed + slot
    return make_sampler(replace(sampler_cfg, seed=seed, params=params), len(problem.directions))


def _is_sqlite(storage: RDBStorage) -> bool:
    return storage.engine.dialect.name == "sqlite"


def _is_stale(trial: FrozenTrial, claims: ClaimLock, live: Mapping[int, str]) -> bool:
    """Whether a RUNNING trial's worker is dead. On one machine, whether no live worker's
    file holds it (`ClaimLock.held`); on a server, by its tag or, untagged, by its age."""
    if claims.local:
        return trial.number not in live
    worker = TrialRecord.of(trial).worker
    if worker is not None:
        return is_alive_here(worker) is False
    # Untagged: its worker died between `ask` and the tag, or is still between them.
    started = trial.datetime_start
    return started is not None and (datetime.now() - started).total_seconds() > _CLAIM_AGE_S


def recover_stale_trials(study: optuna.Study, storage: BaseStorage,
                         claims: ClaimLock) -> list[int]:
    """Fail RUNNING trials whose worker is dead, and enqueue them again.

    `storage` is the storage `study` was opened with. Only the worker whose FAIL lands first
    enqueues the retry, so concurrent resumes do not duplicate it.
    """
    fail_stale(study, storage)  # database servers: trials whose worker (any host) stopped beating
    with claims.recovering(study.study_name):
        return _recover(study, storage, claims)


def _recover(study: optuna.Study, storage: BaseStorage, claims: ClaimLock) -> list[int]:
    held = claims.held(study.study_name) if claims.local else Held({}, {}, [])
    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
             if _is_stale(t, claims, held.live)]
    # Dead workers whose file names none of these trials: killed between `ask` and recording
    # the trial they asked for (their file names no trial, or the one they ran before).
    named = {held.dead[t.number][0] for t in stale if t.number in held.dead}
    unnamed = " or ".join(sorted({w for w in held.gone if w not in named})) or None
    retried: list[int] = []
    for t in stale:
        worker, cause = held.dead.get(t.number) or (TrialRecord.of(t).worker or unnamed or "",
                                                    "")
        if not worker and claims.local:
            # No record at all and no dead worker's file: its worker closed its file, so it
            # was not killed; it ended on an error before storing the trial (the error its
            # command printed).
            cause = "not stored: its worker ended on an error before storing it"
        if retry_dead_trial(storage, study, t, worker or "unrecorded", cause):
            retried.append(t.number)  # else another worker failed it first
    return retried


def enqueue_warm_start(study: optuna.Study, problem: SearchProblem, n_trials: int) -> int:
    plans = problem.warm_start()[: max(0, n_trials)]
    for params in plans:
        study.enqueue_trial(params, skip_if_exists=True)
    return len(plans)
