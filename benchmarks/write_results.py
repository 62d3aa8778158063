"""Render `benchmarks/RESULTS.md` from the benchmark runs recorded in `benchmarks/runs/*.json`.

    python benchmarks/write_results.py            # write RESULTS.md
    python benchmarks/write_results.py --check    # exit 1 when RESULTS.md is not the rendering

One section per benchmark (what it measures, the command), one table per figure: every recorded
run's value, spread, machine load and date. A benchmark with no record says "not run yet" and
gives its command. Nothing in RESULTS.md is typed by hand: run a benchmark, then this script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
RUNS_DIR = HERE / "runs"
RESULTS = HERE / "RESULTS.md"


class Benchmark(NamedTuple):
    name: str
    what: str
    command: str


BENCHMARKS = (
    Benchmark("main_command", "Wall and CPU time of the main command, `python -m ipu_tune "
              "model=resnet101 search=throughput` (100 trials, exports and report), each run "
              "in a fresh results directory with the model profile cached.",
              "python benchmarks/main_command.py --rounds 3"),
    Benchmark("deep_model", "Wall time of the main command on a 300-layer BERT (hidden 64, "
              "3 trials, 2 Mk2 IPUs) where no plan fits: the pipeline-split planner of the warm "
              "start and of the remedy naming the fewest IPUs that fit.",
              "python benchmarks/deep_model.py --rounds 3"),
    Benchmark("calibration_fit", "The simulator against the measured runs it was calibrated on "
              "(deterministic): error of each predicted rate and cycle count, and the memory "
              "verdict of the out-of-memory point.",
              "python benchmarks/calibration_fit.py"),
    Benchmark("pod_scaling", "What the simulator predicts for ResNet-50 (the MLPerf encoding) "
              "on 16 to 256 Mk2 IPUs at gradient accumulation 1, 3, 10 and 32 (deterministic): "
              "all-reduce time per weight update and samples/s per IPU; and the fall per IPU "
              "from the MLPerf POD16 run (GA 10) to the POD64 run (GA 3), measured and "
              "simulated as run.",
              "python benchmarks/pod_scaling.py"),
    Benchmark("inference_latency", "What the simulator predicts for single-IPU inference as "
              "Graphcore's benchmarks run it (deterministic): ResNet-50, ViT-B/16 and "
              "BERT-Large SQuAD SL128, FP16.16 with half partials, synthetic data, on a Mk2, a "
              "Bow and a C600, per micro-batch: samples/s at device iterations 1 and 100 and "
              "the latency of a call of one micro-batch (device iterations 1).",
              "python benchmarks/inference_latency.py"),
    Benchmark("hf_coverage", "Every Hugging Face Transformers model type with its defaults "
              "(`model=hf model.hf.model_type=TYPE`): how many profile, are refused in one line "
              "(by reason), crash or time out; then the main command (10 trials) on 20 of the "
              "profiled types.",
              "python benchmarks/hf_coverage.py --search 20"),
    Benchmark("simulator_speed", "CPU time of one `simulate` of ResNet-101's seed plan (best of "
              "5 rounds, `time.process_time`): cached per-block costs, cold, 500 varied plans.",
              "python benchmarks/simulator_speed.py"),
    Benchmark("startup", "Start-up and fixed costs where users wait, each paired with a "
              "reference in the same rounds (medians; spread over the rounds).",
              "python benchmarks/startup.py --rounds 5"),
    Benchmark("evaluate_cost", "Instructions per `ipu_tune.evaluate(mapping)` call and its "
              "parts under valgrind's callgrind: a figure a loaded machine does not move.",
              "python benchmarks/evaluate_cost.py --calls 200"),
    Benchmark("evaluate_identity", "Whether a code change left `evaluate` bit-identical: "
              "outcomes of 400 varied plans dumped before the change, compared after it.",
              "python benchmarks/evaluate_identity.py dump before.pkl   # on the old code\n"
              "python benchmarks/evaluate_identity.py check before.pkl  # on the new code"),
    Benchmark("profile_speed", "Model profiling time: cold (tracing on the meta device), from "
              "the disk cache, from the in-process cache.",
              "python benchmarks/profile_speed.py --repeats 3"),
    Benchmark("report_build", "Build time and size of `report.html` for a 500-trial study.",
              "python benchmarks/report_build.py --trials 500"),
    Benchmark("tuner_overhead", "Per-trial time of the main command's trial loop against a "
              "bare Optuna loop (`Study.optimize`) on the same storage and objective (paired "
              "rounds); with TPE, with and without the tool's local search.",
              "python benchmarks/tuner_overhead.py --sampler random --trials 100 1000 "
              "--bare-storage ipu-tune   # the bare loop on ipu-tune's journal\n"
              "python benchmarks/tuner_overhead.py --sampler tpe --trials 100 1000 "
              "--bare-storage ipu-tune --no-local-search   # TPE alone on both sides\n"
              "python benchmarks/tuner_overhead.py --sampler tpe --trials 100 1000 "
              "--bare-storage ipu-tune   # the tool's default: TPE + local search"),
    Benchmark("workers_scaling", "`study.workers=2` against `1` on the same 300-trial study "
              "(paired runs; needs two idle cores); the journal on disk or in /dev/shm.",
              "python benchmarks/workers_scaling.py --trials 300 --pairs 2\n"
              "python benchmarks/workers_scaling.py --trials 300 --pairs 2 --dir /dev/shm"),
    Benchmark("storage_io", "Durable writes per finished trial of the main command's config, "
              "and the main command on an idle disk against a disk shared with a `dd "
              "oflag=dsync` writer (paired, alternating; optionally a baseline checkout too).",
              "python benchmarks/storage_io.py --pairs 3 [--baseline CHECKOUT]"),
    Benchmark("journal_append", "Durable journal appends per second, 1 against 2 processes on "
              "one file: Optuna's `JournalFileBackend` (fsync under the lock) and ipu-tune's "
              "batching backend (fsync after the lock), rounds alternating.",
              "python benchmarks/journal_append.py --appends 200 --rounds 3"),
    Benchmark("tpe_long", "TPE's cost per trial as a 1,500-trial study grows, with and "
              "without `sampler.params.history`, against random search (in-memory storage), "
              "and the best throughput each reaches.",
              "python benchmarks/tpe_long.py --trials 1500 --history 500 --rounds 1"),
    Benchmark("search_quality", "Best plan found in 100 and 200 trials as a share of a "
              "reference optimum computed from the simulator, for the shipped search, plain "
              "TPE and random search, over several seeds.",
              "python benchmarks/search_quality.py            # all cases, 5 seeds (hours)\n"
              "python benchmarks/search_quality.py --quick    # main case, 2 seeds"),
)


def number(value: float) -> str:
    """A figure with the digits a benchmark's spread justifies (about 3-4 significant)."""
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 100:
        return f"{value:.1f}"
    if size >= 1 or size == 0:
        return f"{value:.2f}"
    return f"{value:.3g}"


def load_runs(runs_dir: Path = RUNS_DIR) -> dict[str, list[dict[str, Any]]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(runs_dir.glob("*.json"))}


def _figure_table(name: str, runs: list[dict[str, Any]]) -> list[str]:
    rows = [(run, fig) for run in runs for fig in run["figures"] if fig["name"] == name]
    unit = rows[-1][1]["unit"]
    target = rows[-1][1]["target"]
    head = f"**{name}** ({unit}" + (f"; target {target}" if target else "") + ")"
    lines = [head, "", "| date | value | spread (low - high) | load avg 1 min, start / end "
             "(cores) | code | command | note |", "| --- | ---: | --- | --- | --- | --- | --- |"]
    for run, fig in reversed(rows):  # newest first
        spread = fig["spread"]
        spread_txt = f"{number(spread[0])} - {number(spread[1])}" if spread else "-"
        load = f"{run['load_start'][0]:.2f} / {run['load_end'][0]:.2f} ({run['cpus']})"
        code = run.get("code", "not recorded")  # records older than the code field
        lines.append(f"| {run['date']} | {number(fig['value'])} | {spread_txt} | {load} | "
                     f"{code} | `{run['command']}` | {fig['note'] or ''} |")
    return [*lines, ""]


def render(runs: dict[str, list[dict[str, Any]]]) -> str:
    out = ["# Benchmark results", "",
           "Written by `python benchmarks/write_results.py` from the records in "
           "`benchmarks/runs/` (each benchmark appends one when it runs); do not edit by hand.",
           "Load is the machine's load average (`os.getloadavg`, 1 minute) when the run "
           "started and ended: timings taken under load are slower, ratios are paired within "
           "a run so that load hits both sides alike. Code: the commit measured.", ""]
    for bench in BENCHMARKS:
        out += [f"## {bench.name}", "", bench.what, "", "```bash", bench.command, "```", ""]
        recorded = runs.get(bench.name, [])
        if not recorded:
            out += ["Not run yet.", ""]
            continue
        names = list(dict.fromkeys(f["name"] for run in recorded for f in run["figures"]))
        for name in names:
            out += _figure_table(name, recorded)
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when RESULTS.md differs from the rendering of the runs")
    args = parser.parse_args()
    text = render(load_runs())
    if args.check:
        same = RESULTS.exists() and RESULTS.read_text() == text
        print("RESULTS.md is up to date" if same else "RESULTS.md differs: run "
              "python benchmarks/write_results.py")
        return 0 if same else 1
    RESULTS.write_text(text)
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
