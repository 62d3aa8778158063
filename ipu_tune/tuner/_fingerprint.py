"""What makes a study one problem: its fingerprint, how two differ, and the refusal of a
named study that holds another problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipu_tune.config import fill_old_defaults, hosts_as_servers
from ipu_tune.errors import IpuTuneError
from ipu_tune.records import StudyMeta

__all__ = ["another_problem", "problem_differences", "problem_fingerprint"]

# What makes two runs the same problem: the model, workload, system, the starting plan (the
# warm start and the `changes` objective count from it), the sampler (its draws are the
# study's), the simulator constants file, the search preset's definition, and the values of
# the pinned keys.
_PROBLEM_SECTIONS = ("model", "workload", "system", "plan", "sampler", "simulator")
_SEARCH_KEYS = ("name", "space", "objectives", "throughput_floor", "global_batch_size")
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


def another_problem(name: str, diffs: list[str], mine: StudyMeta) -> IpuTuneError:
    shown = "; ".join(diffs[:_MAX_DIFFS_SHOWN])
    more = f"; and {len(diffs) - _MAX_DIFFS_SHOWN} more" if len(diffs) > _MAX_DIFFS_SHOWN else ""
    return IpuTuneError(
        f"study.name={name!r}: the stored study is another problem ({shown}{more}); "
        f"{_sampler_hint(name, diffs, mine)}choose another study.name, or leave study.name "
        "unset for a name of its own"
    )


def _sampler_hint(name: str, diffs: list[str], mine: StudyMeta) -> str:
    """Why a study refuses another sampler, and the new study to run it as: the stored trials
    were drawn by the study's sampler from its seed (and a sampler's state is rebuilt from
    them), so another sampler or seed is a study of its own, not a continuation."""
    if not any(d.startswith("sampler.") for d in diffs):
        return ""
    sampler = (mine.config or {}).get("sampler") or {}
    changed = {d.partition(":")[0] for d in diffs}
    tag = (sampler.get("name") if "sampler.name" in changed else
           f"seed{sampler.get('seed')}" if "sampler.seed" in changed else
           f"{sampler.get('name')}-2")
    return ("a study is searched by one sampler from one seed (every sampler.* key): to go on "
            f"with this one, start a new study (study.name={name}-{tag}); ")
