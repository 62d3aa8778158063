"""`ipu-tune evaluate FILE [--json]`: simulate one config and print the breakdown."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from ipu_tune._api import evaluate_config
from ipu_tune.cli._common import fail
from ipu_tune.config import load_config
from ipu_tune.errors import IpuTuneError

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ipu-tune evaluate",
        description="Simulate one plan (a YAML of the config schema, e.g. an exported best.yaml).",
    )
    parser.add_argument("config", help="path to a YAML config (model/workload/system/plan)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(list(argv))
    try:
        cfg = load_config(args.config)
        result = evaluate_config(cfg)
    except IpuTuneError as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from ipu_tune.cli.evaluate_format import format_result

        print(format_result(result, cfg))
    return 0
