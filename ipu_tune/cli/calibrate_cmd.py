"""`ipu-tune calibrate [FILE ...]`: refit the simulator's free constants to measured runs.

Each FILE is a YAML list (or a `points:` list) or a CSV with dotted column names; a row is an
evaluate-schema config plus `samples_per_s`, `device_cycles` and/or `result: fits|out_of_memory`
(format: ipu_tune/calibration/points.yaml). Prints the refitted constants as YAML;
`--output FILE` writes them too. Apply them with
`simulate(..., constants=constants_from_mapping(yaml.safe_load(open(FILE))))`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ipu_tune.cli._common import fail
from ipu_tune.errors import IpuTuneError

__all__ = ["format_fit", "main"]


def format_fit(fit: object) -> str:
    """The YAML text of a `FitResult`: the constants, then the per-row errors as comments."""
    from ipu_tune.calibration import FitResult

    assert isinstance(fit, FitResult)
    lines = [
        "# ipu-tune calibrate: simulator constants refitted by least squares in log space",
        f"# loss {fit.loss_before:.4g} -> {fit.loss_after:.4g} over {len(fit.predictions)} rows; "
        f"fitted: {', '.join(fit.names)}",
    ]
    for p in fit.predictions:
        errs = ", ".join(f"{k} {v:+.1%}" for k, v in p.errors().items())
        verdict = "fits" if p.memory_ratio <= 1.0 else "out_of_memory"
        memory = f"predicted {verdict}" + (
            f" (measured {p.point.result})" if p.point.result is not None else "")
        lines.append(f"#   {p.point.name}: {errs + '; ' if errs else ''}{memory}")
    for name in fit.names:
        lines.append(f"{name}: {getattr(fit.constants, name):.6g}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ipu-tune calibrate",
        description="Refit the simulator's free constants to measured runs and print them as YAML.",
    )
    parser.add_argument("files", nargs="*", help="YAML or CSV files of measured rows "
                        "(default: the package's own calibration points)")
    parser.add_argument("--defaults", action="store_true",
                        help="also fit the package's own calibration points")
    parser.add_argument("--fit", default="", help="comma-separated constants to refit "
                        "(default: all fitted constants)")
    parser.add_argument("--output", help="also write the constants YAML to this file")
    parser.add_argument("--max-evals", type=int, default=3000,
                        help="objective evaluations per Nelder-Mead round (default 3000)")
    args = parser.parse_args(list(argv))
    try:
        from ipu_tune.calibration import default_points, fit_constants, load_points

        points = []
        for file in args.files:
            points.extend(load_points(file))
        if args.defaults or not args.files:
            points.extend(default_points())
        names = [n.strip() for n in args.fit.split(",") if n.strip()] or None
        if args.max_evals < 10:
            raise IpuTuneError(f"--max-evals={args.max_evals}: must be >= 10")
        fit = fit_constants(points, names=names, max_evals=args.max_evals)
        text = format_fit(fit)
        if args.output:
            try:
                Path(args.output).write_text(text)
            except OSError as exc:
                raise IpuTuneError(
                    f"--output {args.output!r}: cannot be written ({exc.strerror})") from None
    except IpuTuneError as exc:
        return fail(str(exc))
    print(text, end="")
    if args.output:
        print(f"# written: {args.output}")
    return 0
