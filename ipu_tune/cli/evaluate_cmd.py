"""`ipu-tune evaluate FILE [--json]`: simulate one config and print the breakdown."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from ipu_tune._api import evaluate_config
from ipu_tune.cli._common import TRUST_HELP, fail, print_out
from ipu_tune.config import load_config, read_yaml
from ipu_tune.errors import IpuTuneError
from ipu_tune.simulator import DEFAULT_CONSTANTS, constants_from_mapping

__all__ = ["main"]


def _read_constants(path: str) -> dict[str, float]:
    data = read_yaml(Path(path), "--constants file")
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
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)
    args = parser.parse_args(list(argv))
    try:
        cfg = load_config(args.config, trust_remote_code=args.trust_remote_code)
        constants = DEFAULT_CONSTANTS
        if args.constants:
            constants = constants_from_mapping(_read_constants(args.constants))
        result = evaluate_config(cfg, constants)
    except IpuTuneError as exc:
        return fail(str(exc))
    if args.json:
        return print_out(json.dumps(result.to_dict(), indent=2))
    from ipu_tune.cli.evaluate_format import format_result

    return print_out(format_result(result, cfg))
