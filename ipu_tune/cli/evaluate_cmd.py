"""`ipu-tune evaluate FILE [key=value ...] [--json]`: simulate one config, print the breakdown.

Overrides are spelled as Hydra spells them (`plan.precision=16.16`, `plan.pipeline.splits=[a,b]`,
`system=bow system.num_ipus=4`, `~model.kwargs.NAME`) and applied to the file as written before
it is checked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ipu_tune._api import evaluate_config
from ipu_tune.case import read_constants, validate_whole
from ipu_tune.cli._common import TRUST_HELP, ArgumentParser, fail, path_arg, print_out
from ipu_tune.config import (
    GIVEN_OVERRIDES,
    EvalConfig,
    check_sweep,
    load_unvalidated,
    parse_overrides,
    read_config_file,
    section_mapping,
    validate,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.simulator import DEFAULT_CONSTANTS

__all__ = ["apply_overrides", "main"]


def apply_overrides(path: str, overrides: Sequence[str],
                    trust_remote_code: bool = False) -> EvalConfig:
    """The config of YAML file `path` with Hydra-style `overrides` applied, then the plan of
    its `plan.from_ipu_config` file (keys overridden here win, as on the tuner's command
    line), then checked (a file the overrides complete is not refused for what they change)."""
    token = GIVEN_OVERRIDES.set(overrides)  # a refused value is echoed as typed
    try:
        cfg = _overridden(path, overrides, trust_remote_code)
    finally:
        GIVEN_OVERRIDES.reset(token)
    if not cfg.plan.from_ipu_config:
        return validate_whole(cfg)
    from ipu_tune.exports import apply_ipu_config  # with optuna: only when a file is named

    pinned = frozenset(o.key_or_group for o in parse_overrides(overrides))
    return apply_ipu_config(validate(cfg, check_layout=False), pinned, whole=True)


def _overridden(path: str, overrides: Sequence[str], trust_remote_code: bool) -> EvalConfig:
    """The unchecked config of `path` with `overrides` applied to the file as written, so a
    preset the overrides choose fills in what neither the file nor they give."""
    if not overrides:
        return load_unvalidated(path, trust_remote_code=trust_remote_code)
    from omegaconf import OmegaConf

    from ipu_tune.knobs import knob

    plain = OmegaConf.create(dict(read_config_file(path, trust_remote_code)))
    parsed = list(zip(overrides, parse_overrides(overrides), strict=True))
    # As Hydra composes them: a preset chosen (`system=bow`, `model=vit_b_16`) first, then the
    # keys set over it, in whatever order the command line gives them.
    parsed.sort(key=lambda to: "." in to[1].key_or_group)
    for text, o in parsed:
        key = o.key_or_group
        check_sweep(o, text, False, "evaluate")
        if o.is_delete():
            node = plain
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.get(part) if node is not None else None
            if node is None or leaf not in node:
                raise IpuTuneError(f"override {text!r}: {key} is not set in {path}")
            del node[leaf]
            continue
        value = o.value()
        try:
            k = knob(key)
        except KeyError:
            k = None
        if k is not None and k.type is str and not isinstance(value, str):
            value = text.split("=", 1)[1].strip()  # 16.16 is a precision, not a number
        if OmegaConf.select(plain, key, default="<missing>") == "<missing>" and not o.is_add():
            section = key.split(".", 1)[0]
            if section not in ("model", "workload", "system", "plan"):
                raise IpuTuneError(f"override {text!r}: unknown key {key!r}; keys begin with "
                                   "model., workload., system. or plan.")
        section = key.split(".", 1)[0]
        if "." in key and plain.get(section) is not None and not OmegaConf.is_dict(
                plain[section]):  # a preset's name (`system: bow`) as its mapping
            plain[section] = dict(section_mapping(section, plain[section]))
        OmegaConf.update(plain, key, value, merge=False, force_add=True)
    data = OmegaConf.to_container(plain)
    assert isinstance(data, dict)
    return load_unvalidated({str(k): v for k, v in data.items()},
                            trust_remote_code=trust_remote_code)


def main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune evaluate",
        description="Simulate one plan (a YAML of the config schema, e.g. an exported best.yaml).",
    )
    parser.add_argument("config", type=path_arg,
                        help="path to a YAML config (model/workload/system/plan)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="Hydra-style overrides, e.g. plan.precision=16.16 "
                             "workload.micro_batch_size=16")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--constants", metavar="FILE", type=path_arg,
                        help="simulator constants YAML written by `ipu-tune calibrate --output`")
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)
    args = parser.parse_intermixed_args(list(argv))
    try:
        # `simulator.constants=FILE`, as the tuner takes it, is the same as --constants FILE.
        key = "simulator.constants="
        files = [o[len(key):] for o in args.overrides if o.startswith(key)]
        overrides = [o for o in args.overrides if not o.startswith(key)]
        cfg = apply_overrides(args.config, overrides,
                              trust_remote_code=args.trust_remote_code)
        constants = DEFAULT_CONSTANTS
        if args.constants or files:
            constants = read_constants(args.constants or files[-1],
                                       "--constants" if args.constants else key[:-1])
        result = evaluate_config(cfg, constants)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    if args.json:
        return print_out(json.dumps(result.to_dict(), indent=2))
    from ipu_tune.cli.evaluate_format import format_result
    from ipu_tune.models import profile_model

    # The profile `evaluate_config` built (memoised): its input kind decides what runs.
    text = format_result(result, cfg, profile_model(cfg.model).facts)
    if cfg.plan.ipu_config_carried:  # what the file sets that the figures leave out
        from ipu_tune.exports import ipu_config_unsimulated

        text = f"{ipu_config_unsimulated(cfg)}\n{text}"
    return print_out(text)
