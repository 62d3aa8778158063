"""Which Hugging Face Transformers model types ipu-tune takes with their defaults, and how the
others end.

    python benchmarks/hf_coverage.py [--search 20] [--timeout 90] [--no-record]

For every model type Transformers registers (`transformers.CONFIG_MAPPING`), it profiles the
model a user gets from `model=hf model.hf.model_type=TYPE` alone (the config class's defaults,
the type's usual head, 128 tokens or the config's shorter limit, or the config's image size),
in a fresh profile cache, and sorts the outcome: profiled; refused in one line
(`IpuTuneError`), by reason; crashed (any other exception: the target is none); timed out.
Then, for `--search` of the profiled types (every k-th, in name order), it runs the main
command with 10 trials in a fresh process and counts those that find a fitting plan, those that
end "no plan fits" (exit 0: an infeasible plan is a result) with a remedy naming a larger
system that fits or saying none does, and those that end otherwise (the target is none).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _record import REPO, Run

# Reasons of a one-line refusal, by the words of its message (first match).
_REASONS = (
    ("no usual head", "no usual head among them"),
    ("Transformers cannot build it", "Transformers cannot build it"),
    # Fails on the meta device for want of values, and on the CPU too or too large to try.
    ("cannot run on the meta device", "cannot run forward and backward on the meta device"),
    ("cannot run on the meta device", "depend on the pixels' values"),
    # A vision-language model's defaults that Transformers' forward refuses too: an image
    # token outside the text vocabulary, features of another width than the text (Ovis2's
    # table at 1536 beside a 4096-wide text model), feature layers past the tower, an image
    # of more tokens than positions.
    ("Transformers cannot build it", "a token of the text vocabulary"),
    ("Transformers cannot build it", "its image features are"),
    ("Transformers cannot build it", "indices of the vision tower's"),
    ("Transformers cannot build it", "one image makes"),
    ("reads another input", "is an encoder-decoder: its decoder's tokens"),
    ("reads another input", "a model of one input"),
    ("reads another input", "an audio model ipu-tune can feed"),
    ("reads another input", " alone ("),  # a base model on one of its inputs fails
    ("reads another input", "its image features need more than pixels"),
    ("fails on the usual input", "cannot run forward and backward on"),  # on any device
    ("fails on the usual input", "its vision tower fails on one image"),
)


class _TimedOut(BaseException):
    """Past the time limit: a BaseException, so no `except Exception` on the way turns it into
    a one-line refusal."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _TimedOut


def _profile_outcome(model_type: str, timeout_s: int) -> tuple[str, str]:
    """(outcome, detail) of profiling one model type with its defaults."""
    import ipu_tune
    from ipu_tune.errors import IpuTuneError

    signal.alarm(timeout_s)
    try:
        ipu_tune.profile({"name": "hf", "hf": {"model_type": model_type}})
    except IpuTuneError as exc:
        text = str(exc)
        reason = next((name for name, words in _REASONS if words in text), "other")
        return f"refused: {reason}", text.splitlines()[0][:160]
    except _TimedOut:
        return "timed out", f"> {timeout_s} s"
    except Exception as exc:  # what the benchmark looks for: anything but one line
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return "crashed", f"{type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
    finally:
        signal.alarm(0)
    return "profiled", ""


def _search_outcome(model_type: str, results: Path) -> str:
    """How the main command ends on one model type with its defaults and 10 trials."""
    done = subprocess.run(
        [sys.executable, "-m", "ipu_tune", "model=hf", f"model.hf.model_type={model_type}",
         "study.n_trials=10", "study.progress_bar=false", f"results_dir={results}"],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    if done.returncode == 0 and "best: trial" in done.stdout:
        return "found a fitting plan"
    if done.returncode == 0 and "no plan fits" in done.stdout:
        larger = re.search(r"^  - \d+ \S+ IPUs \(.*\): fits,", done.stdout, re.MULTILINE)
        return _LARGER if larger else _NO_SYSTEM
    return "ended otherwise"


# How a "no plan fits" ends: the remedies name a larger system of the same IPUs that fits, or
# not even a pipeline stage per block fits.
_LARGER = "no plan fits on 2 IPUs, a larger system fits (remedy shown)"
_NO_SYSTEM = "no plan fits on any number of IPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", type=int, default=20, help="profiled types to search")
    parser.add_argument("--timeout", type=int, default=90, help="seconds per profile")
    parser.add_argument("--no-record", action="store_true",
                        help="print the counts only, append no record to benchmarks/runs")
    args = parser.parse_args()
    record = Run("hf_coverage")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["IPU_TUNE_CACHE_DIR"] = str(Path(tmp) / "cache")  # cold profiles
        signal.signal(signal.SIGALRM, _alarm)
        from transformers import CONFIG_MAPPING

        types = sorted(CONFIG_MAPPING.keys())
        outcomes = {t: _profile_outcome(t, args.timeout) for t in types}
        counts = Counter(outcome for outcome, _ in outcomes.values())
        for t, (outcome, detail) in outcomes.items():
            if outcome in ("crashed", "timed out", "refused: other"):
                print(f"{t}: {outcome}: {detail}")
        profiled = [t for t, (outcome, _) in outcomes.items() if outcome == "profiled"]
        step = max(1, len(profiled) // max(1, args.search))
        chosen = profiled[::step][:args.search]
        searched = Counter(_search_outcome(t, Path(tmp) / "results") for t in chosen)
    record.add("model types tried", len(types), "types", note="transformers.CONFIG_MAPPING")
    for outcome in ("profiled", *(f"refused: {name}" for name in dict(_REASONS)), "refused: other",
                    "crashed", "timed out"):
        target = "0" if outcome in ("crashed", "timed out") else None
        record.add(f"profiles: {outcome}", counts.get(outcome, 0), "types", target=target)
        print(f"{outcome}: {counts.get(outcome, 0)} of {len(types)}")
    for outcome in ("found a fitting plan", _LARGER, _NO_SYSTEM, "ended otherwise"):
        target = "0" if outcome == "ended otherwise" else None
        record.add(f"main command, 10 trials: {outcome}", searched.get(outcome, 0), "types",
                   target=target, note=f"of {len(chosen)} profiled types: {', '.join(chosen)}")
        print(f"main command: {outcome}: {searched.get(outcome, 0)} of {len(chosen)}")
    if not args.no_record:
        record.save()


if __name__ == "__main__":
    main()
