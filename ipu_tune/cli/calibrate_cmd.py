"""`ipu-tune calibrate [FILE ...]`: refit the simulator's free constants to measured runs, or
(`--check`) say how far the simulator is from them without refitting.

Each FILE is a YAML list (or a `points:` list) or a CSV with dotted column names; a row is an
evaluate-schema config plus `samples_per_s`, `device_cycles` and/or `result: fits|out_of_memory`
(format: ipu_tune/calibration/points.yaml). Prints the refitted constants as YAML;
`--output FILE` writes them too. Apply them with `simulator.constants=FILE` (the tuner and
`evaluate`), or `simulate(..., constants=constants_from_mapping(yaml.safe_load(open(FILE))))`.
Fewer measured rows than constants to fit is refused (say how many are needed).
`--check [--constants FILE] [--json]` prints each row's measured and predicted figures and, per
model and workload mode, the median absolute and the worst samples/s error.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ipu_tune import interrupts
from ipu_tune.cli._common import (
    OUTPUT_OUTCOME,
    TRUST_HELP,
    ArgumentParser,
    aligned_lines,
    fail,
    path_arg,
    print_out,
)
from ipu_tune.errors import IpuTuneError, bound_text

__all__ = ["format_fit", "main"]

# Simulator runs a fit may take: the default 3,000 refits the shipped rows in about a minute;
# a million is a day's work, beyond which a typo is more likely than a wish.
_MAX_EVALS = 1_000_000


def format_fit(fit: object) -> str:
    """The YAML text of a `FitResult`: the constants, then the per-row errors as comments."""
    from ipu_tune.calibration import FitResult

    assert isinstance(fit, FitResult)
    lines = [
        "# ipu-tune calibrate: simulator constants refitted by least squares in log space",
        f"# loss {fit.loss_before:.4g} -> {fit.loss_after:.4g} over {len(fit.predictions)} rows; "
        f"fitted: {', '.join(fit.names)}",
    ]
    if fit.unmoved:
        lines.append(f"# not refitted, no row depends on them: {', '.join(fit.unmoved)}")
    for p in fit.predictions:
        errs = ", ".join(f"{k} {v:+.1%}" for k, v in p.errors().items())
        verdict = "fits" if p.memory_ratio <= 1.0 else "out_of_memory"
        memory = f"predicted {verdict}" + (
            f" (measured {p.point.result})" if p.point.result is not None else "")
        lines.append(f"#   {p.point.name}: {errs + '; ' if errs else ''}{memory}")
    for name in fit.names:
        lines.append(f"{name}: {getattr(fit.constants, name):.6g}")
    return "\n".join(lines) + "\n"


def _load_file(file: str, load_points: Callable[[Any], list[Any]], trusted: bool) -> list[Any]:
    """Rows of one file read by the safe readers (size, encoding, YAML depth and aliases); a row
    naming model._target_ is refused without --trust-remote-code, before any model is built."""
    points = load_points(Path(file))
    for p in points:
        target = p.config.model._target_
        if target and not trusted:
            raise IpuTuneError(
                f"{p.name}.model._target_={target[:80]!r} in calibration file {file!r}: code "
                "named in a file runs only with --trust-remote-code; allowed without it: "
                "model.name of the zoo")
    return points


def _check_text(predictions: Sequence[Any], constants_label: str) -> str:
    """The text of `--check`: each row's figures, the errors per model and mode, memory."""
    from ipu_tune.calibration import check_table, error_summary, memory_agreement

    table = check_table(predictions)
    shown = table[["row", "model", "mode", "system", "measured", "predicted"]].copy()
    shown["error"] = [f"{e:+.1f}%" if e == e else "" for e in table["error_pct"]]
    summary = error_summary(table)
    summary["median |error|"] = [f"{e:.1f}%" for e in summary.pop("median_abs_error_pct")]
    summary["worst error"] = [f"{e:+.1f}%" for e in summary.pop("worst_error_pct")]
    lines = [f"# ipu-tune calibrate --check: the simulator ({constants_label}) against "
             f"{len(predictions)} measured row{'' if len(predictions) == 1 else 's'}, "
             "nothing refitted",
             "# error = predicted / measured - 1", _text_table(shown, ["row", "model", "mode"]), ""]
    if len(summary):
        lines += ["samples/s error per model and workload mode:",
                  _text_table(summary, ["model", "mode"])]
    right, rows = memory_agreement(table)
    lines.append(f"memory: {right} of {rows} row{'' if rows == 1 else 's'} predicted as "
                 "measured (fits or out_of_memory; a row with a measured rate ran, so it "
                 "fitted)")
    return "\n".join(lines)


def _check_json(predictions: Sequence[Any], constants_label: str) -> dict[str, Any]:
    """`--check --json`: the same figures as numbers (NaN as null)."""
    from ipu_tune.calibration import check_table, error_summary, memory_agreement

    table = check_table(predictions)
    right, rows = memory_agreement(table)

    def records(frame: Any) -> list[dict[str, Any]]:
        return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                for r in frame.to_dict(orient="records")]

    return {"constants": constants_label, "rows": records(table),
            "samples_per_s_error_by_model_and_mode": records(error_summary(table)),
            "memory": {"predicted_as_measured": right, "rows": rows}}


def _text_table(table: Any, names: list[str]) -> str:
    """A DataFrame of text cells as a plain-text table: `names` left, figures right."""
    columns = [str(c) for c in table.columns]
    rows = [{c: str(v) for c, v in zip(columns, r, strict=True)}
            for r in table.itertuples(index=False)]
    return "\n".join(aligned_lines(columns, rows, [c for c in columns if c not in names]))


def _check(points: Sequence[Any], constants_file: str | None, as_json: bool) -> str:
    from ipu_tune.calibration import predict
    from ipu_tune.case import read_constants
    from ipu_tune.simulator import DEFAULT_CONSTANTS

    constants = DEFAULT_CONSTANTS
    if constants_file:
        constants = read_constants(constants_file, "--constants")
    label = f"constants of {constants_file}" if constants_file else "shipped constants"
    predictions = predict(points, constants)
    if as_json:
        return json.dumps(_check_json(predictions, label), indent=2)
    return _check_text(predictions, label)


def _fit_names(text: str | None) -> list[str] | None:
    """The constants `--fit` names (None: the flag left out, all of them). `--fit ''` names
    none: refused, not read as all of them."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        from ipu_tune.simulator import REFITTABLE

        raise IpuTuneError(f"--fit={text!r}: names no constant; allowed: comma-separated names "
                           f"of {', '.join(REFITTABLE)}, or no --fit to refit the fitted ones")
    return names


def _check_options(args: argparse.Namespace) -> None:
    """--check refits nothing, so the fit's options have nothing to act on."""
    if args.check:
        for option, given in (("--fit", args.fit), ("--output", args.output)):
            if given is not None:
                raise IpuTuneError(f"{option}={given}: a fit option; --check refits nothing "
                                   "(allowed with --check: FILES, --defaults, --constants, "
                                   "--json)")
    elif args.constants:
        raise IpuTuneError(f"--constants={args.constants}: only with --check (a fit starts "
                           "from the shipped constants)")
    elif args.json:
        raise IpuTuneError("--json: only with --check (a fit prints the constants as YAML)")


def main(argv: Sequence[str]) -> int:
    parser = ArgumentParser(
        prog="ipu-tune calibrate",
        description="Refit the simulator's free constants to measured runs and print them as YAML.",
    )
    parser.add_argument("files", nargs="*", type=path_arg,
                        help="YAML or CSV files of measured rows "
                        "(default: the package's own calibration points)")
    parser.add_argument("--defaults", action="store_true",
                        help="also fit the package's own calibration points")
    parser.add_argument("--fit", default=None, help="comma-separated constants to refit "
                        "(default: all fitted constants)")
    parser.add_argument("--output", type=path_arg,
                        help="also write the constants YAML to this file")
    parser.add_argument("--check", action="store_true",
                        help="refit nothing: print how far the simulator is from each row, "
                        "and the median and worst error per model and mode")
    parser.add_argument("--constants", metavar="FILE", type=path_arg,
                        help="with --check: simulator constants YAML written by --output")
    parser.add_argument("--json", action="store_true", help="with --check: print as JSON")
    parser.add_argument("--max-evals", type=int, default=3000,
                        help="objective evaluations per Nelder-Mead round (default 3000)")
    parser.add_argument("--trust-remote-code", action="store_true", help=TRUST_HELP)
    args = parser.parse_intermixed_args(list(argv))
    interrupts.outcome(OUTPUT_OUTCOME)
    try:
        _check_options(args)
        if args.output:  # refused before the fit, not after minutes of it
            from ipu_tune.files import check_target

            check_target(Path(args.output), "--output")
        from ipu_tune.calibration import default_points, fit_constants, load_points

        points = []
        for file in args.files:
            points.extend(_load_file(file, load_points, args.trust_remote_code))
        if args.defaults or not args.files:
            points.extend(default_points())
        if args.check:
            return print_out(_check(points, args.constants, args.json))
        names = _fit_names(args.fit)
        if not 10 <= args.max_evals <= _MAX_EVALS:
            raise IpuTuneError(f"--max-evals={args.max_evals}: must be in "
                               f"10..{bound_text(_MAX_EVALS)}")
        fit = fit_constants(points, names=names, max_evals=args.max_evals)
        text = format_fit(fit)
        if args.output:
            from ipu_tune.files import atomic_write

            atomic_write(Path(args.output), text, key="--output")
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    return print_out((text + (f"# written: {args.output}" if args.output else "")).rstrip("\n"))
