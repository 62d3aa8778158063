"""Which plan the ladder starts from: the user's own, or a seed tutorial's starting point.

A study run with `+experiment=seed_resnet101` (or another `conf/experiment/seed_*.yaml`)
starts from that tutorial's plan; the composed config does not keep the experiment's name, so
the plan is recognised by content: the experiment file's model and every key it sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ipu_tune.config import CONF_DIR, EvalConfig, read_yaml
from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import get_key

__all__ = ["SEED_LABEL", "START_LABEL", "start_label"]

START_LABEL = "your plan"
SEED_LABEL = "seed tutorial plan"
_SECTIONS = ("system", "workload", "plan")


def _flat(node: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for k, v in node.items():
        if isinstance(v, Mapping):
            _flat(v, f"{prefix}{k}.", out)
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, list | tuple) else v


@cache
def _seed_plans() -> tuple[tuple[str | None, tuple[tuple[str, Any], ...]], ...]:
    """(model name, the keys each seed experiment sets) of every `seed_*.yaml`."""
    out = []
    for path in sorted((CONF_DIR / "experiment").glob("seed_*.yaml")):
        raw = read_yaml(path, "experiment file")
        model = None
        for entry in raw.get("defaults") or []:
            if isinstance(entry, Mapping) and "override /model" in entry:
                model = str(entry["override /model"])
        keys: dict[str, Any] = {}
        for section in _SECTIONS:
            _flat(raw.get(section) or {}, f"{section}.", keys)
        out.append((model, tuple(sorted(keys.items(), key=lambda kv: kv[0]))))
    return tuple(out)


def _matches(cfg: EvalConfig, model: str | None, keys: tuple[tuple[str, Any], ...]) -> bool:
    if model is not None and cfg.model.name != model:
        return False
    for key, want in keys:
        try:
            have = get_key(cfg, key)
        except AttributeError:
            return False
        if (list(have) if isinstance(have, list | tuple) else have) != want:
            return False
    return True


def start_label(cfg: EvalConfig) -> str:
    """"seed tutorial plan" when `cfg` is a seed experiment's starting point, else "your plan"."""
    try:
        seeds = _seed_plans()
    except IpuTuneError:  # an unreadable packaged file: the plain label, not a failure
        return START_LABEL
    return SEED_LABEL if any(_matches(cfg, m, k) for m, k in seeds) else START_LABEL
