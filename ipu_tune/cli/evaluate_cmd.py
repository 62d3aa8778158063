"""`ipu-tune evaluate FILE [--json]`: simulate one config and print the breakdown."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import yaml

from ipu_tune._api import evaluate_config
from ipu_tune.cli._common import fail
from ipu_tune.config import load_config
from ipu_tune.errors import IpuTuneError
from ipu_tune.simulator import DEFAULT_CONSTANTS, constants_from_mapping

__all__ = ["main"]


def _read_constants(path: str) -> dict[str, float]:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise IpuTuneError(f"--constants={path!r}: cannot read a YAML mapping ({exc})") from None
    if not isinstance(data, dict):
        raise IpuTuneError(f"--constants={path!r}: expected a mapping of constant: value")
    return data


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ipu-tune evaluate",
        description="Simulate one plan (a YAML of the config schema, e.g. an exported best.yaml).",
    )
    parser.add_argument("config", help="path to a YAML config (model/workload/system/plan)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--constants", metavar="FILE",
                        help="simulator constants YAML written by `ipu-tune calibrate --output`")
    args = parser.parse_args(list(argv))
    try:
        cfg = load_config(args.config)
        constants = DEFAULT_CONSTANTS
        if args.constants:
            constants = constants_from_mapping(_read_constants(args.constants))
        result = evaluate_config(cfg, constants)
    except IpuTuneError as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from ipu_tune.cli.evaluate_format import format_result

        print(format_result(result, cfg))
    return 0
