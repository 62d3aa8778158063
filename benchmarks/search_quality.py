"""Search quality on the presets' real spaces: the best plan found in N trials vs a reference.

Cases (composed with Hydra exactly as the CLI composes them, the preset's own space file,
continuous and conditional knobs included; `pinned` keys are never searched) are listed in
`CASES`: the card's main command, the seed experiment, ResNet-50 and BERT-Large on POD16,
ResNet-152 on four IPUs at micro-batch 16, deep pipelines (ResNeXt-101 over 4 stages,
ResNet-152 and BERT-Large at sequence length 512 over 8 stages), and the `pareto` preset
(throughput vs memory headroom) on three models, measured by the hypervolume of the feasible
front (reference point: 0 samples/s, 0 headroom).

Reference optimum: `search_reference.py`, which shares no code with `ipu_tune.search`
(exhaustive enumeration of small spaces, else a full coordinate descent over every value of
every knob and every cut, cut pairs and chains, with random restarts and kicks; for pareto an
epsilon-constraint sweep of the same descent). Computed from the simulator, never hard-coded;
cached in `benchmarks/.reference_cache/` (git-ignored) under a fingerprint of the case, the
reference's code, the simulator and the configs, so reruns are quick. How each reference was
built is printed.

Searches (in-memory storage; a trial = ask, simulate, tell, as the runner):

- ``tool``: the shipped search: the preset's sampler (conf/sampler/tpe.yaml), the warm start,
  and `refine_study` after every trial (local refinement, iterated-local-search restarts);
- ``tpe``: plain Optuna TPE (default settings), no warm start;
- ``random``: uniform random plans (RandomSampler), no warm start.

Printed: median and worst share of the reference over the seeds after 100 (the default
budget) and `--trials` trials, and the median trials needed to reach 99 % of it (``>N``: not
within the N trials run). Written: one record appended to `benchmarks/runs/search_quality.json`
(date, machine load from `os.getloadavg`, per case and search: the median share at 100 trials
with its spread over the seeds).

    python benchmarks/search_quality.py [--seeds 5] [--cases main,r152_pod4,...]
                                        [--searches tool,tpe,random] [--trials 100]
    python benchmarks/search_quality.py --quick      # 2 seeds, main only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from hydra import compose, initialize_config_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_reference
from _record import Run

from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.hardware import system_from_config
from ipu_tune.models import profile_model
from ipu_tune.search import (
    LocalSearch,
    SearchProblem,
    is_feasible,
    refine_study,
    tell_outcome,
)

CACHE_DIR = Path(__file__).resolve().parent / ".reference_cache"
RUNS_DIR = Path(__file__).resolve().parent / "runs"
_R1 = ("plan.replication_factor",)  # pinned: every IPU one pipeline stage


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    overrides: tuple[str, ...]
    pinned: tuple[str, ...] = ()


CASES = (
    Case("main", "main command: ResNet-101, 2 x Mk2, throughput",
         ("model=resnet101", "search=throughput")),
    Case("seed", "seed experiment (ResNet-101 pipelined, 2 x Mk2)",
         ("+experiment=seed_resnet101",)),
    Case("r50", "ResNet-50, POD16, micro-batch 16",
         ("model=resnet50", "system=pod16", "workload.micro_batch_size=16")),
    Case("bert", "BERT-Large seq 128, POD16, micro-batch 8",
         ("model=bert_large", "system=pod16", "workload.micro_batch_size=8")),
    Case("r152_pod4", "ResNet-152, POD4, micro-batch 16",
         ("model=resnet152", "system=pod4", "workload.micro_batch_size=16")),
    Case("rx101_4", "ResNeXt-101, 4 stages on POD4, micro-batch 8",
         ("model=resnext101", "system=pod4", "plan.replication_factor=1",
          "workload.micro_batch_size=8"), _R1),
    Case("r152_8", "ResNet-152, 8 stages on 8 x Mk2, micro-batch 16",
         ("model=resnet152", "system=pod16", "system.num_ipus=8", "workload.micro_batch_size=16",
          "plan.replication_factor=1"), _R1),
    Case("bert512_8", "BERT-Large seq 512, 8 stages on 8 x Mk2, micro-batch 2",
         ("model=bert_large", "model.sequence_length=512", "system=pod16",
          "system.num_ipus=8", "plan.replication_factor=1", "workload.micro_batch_size=2"),
         _R1),
    Case("pareto", "pareto: ResNet-101, 2 x Mk2 (hypervolume)",
         ("model=resnet101", "search=pareto")),
    Case("pareto_r50", "pareto: ResNet-50, POD4 (hypervolume)",
         ("model=resnet50", "search=pareto", "system=pod4")),
    Case("pareto_bert", "pareto: BERT-Base seq 128, POD4 (hypervolume)",
         ("model=bert_base", "search=pareto", "system=pod4")),
)


def compose_case(case: Case, sampler_seed: int = 0) -> TuneConfig:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        return typed(TuneConfig, compose(config_name="config", overrides=[
            *case.overrides, f"sampler.seed={sampler_seed}"]))


def make_problem(case: Case, sampler_seed: int = 0) -> SearchProblem:
    cfg = compose_case(case, sampler_seed)
    profile = profile_model(cfg.model)
    system = system_from_config(cfg.system)
    return SearchProblem(cfg, profile, system, frozenset(case.pinned))


# -- the measure -------------------------------------------------------------------------------
# The front's hypervolume is measured as the reference measures its own (one definition).
hypervolume = search_reference.hypervolume


class Tracker:
    """Best-so-far of the measure after each trial (throughput, or the front's hypervolume)."""

    def __init__(self, pareto: bool) -> None:
        self.pareto = pareto
        self.points: list[tuple[float, float]] = []
        self.curve: list[float] = []

    def add(self, values: list[float] | None, feasible: bool) -> None:
        if feasible and values and all(math.isfinite(v) for v in values):
            if self.pareto:
                self.points.append((values[0], values[1]))
            else:
                self.points.append((values[0], 0.0))
        if self.pareto:
            self.curve.append(hypervolume(self.points))
        else:
            self.curve.append(max((p[0] for p in self.points), default=0.0))


# -- reference ---------------------------------------------------------------------------------
def _fingerprint(case: Case, restarts: int) -> str:
    """What a cached reference depends on: the case, the reference's and the simulator's code,
    the configs and space files."""
    h = hashlib.sha256(repr((case.overrides, case.pinned, restarts)).encode())
    root = Path(__file__).resolve().parent.parent
    files = [Path(__file__).with_name("search_reference.py"),
             *sorted((root / "ipu_tune" / "simulator").glob("*.py")),
             *sorted((root / "ipu_tune" / "search_spaces").glob("*.yaml")),
             *sorted((root / "ipu_tune" / "conf").rglob("*.yaml")),
             root / "ipu_tune" / "knobs.py", root / "ipu_tune" / "plan.py"]
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def reference(case: Case, restarts: int, pareto: bool) -> float:
    """The independent reference (`search_reference.py`), cached under `CACHE_DIR`."""
    key = _fingerprint(case, restarts)
    path = CACHE_DIR / f"{case.key}.json"
    if path.exists():
        hit = json.loads(path.read_text())
        if hit.get("fingerprint") == key:
            print(f"  reference (cached): {hit['how']}", file=sys.stderr)
            return float(hit["value"])
    value, how = search_reference.reference(compose_case(case), pareto, restarts,
                                            frozenset(case.pinned))
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fingerprint": key, "value": value, "how": how}))
    print(f"  reference: {how}", file=sys.stderr)
    return value


# -- searches ----------------------------------------------------------------------------------
def run_search(case: Case, kind: str, seed: int, trials: int) -> list[float]:
    problem = make_problem(case, seed)
    pareto = len(problem.directions) > 1
    tracker = Tracker(pareto)
    if kind == "random":
        ls = LocalSearch(problem, random.Random(seed))
        for _ in range(trials):
            decoded = problem.codec.decode(ls.random_params())
            out = problem.evaluate(decoded.config, decoded.note)
            tracker.add(out.values, out.feasible)
        return tracker.curve
    sampler = problem.sampler() if kind == "tool" else optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(directions=problem.directions, sampler=sampler)
    if kind == "tool":
        for params in problem.warm_start()[:trials]:
            study.enqueue_trial(params)
    for _ in range(trials):
        trial = study.ask()
        outcome = problem.run_trial(trial)
        # The tool tells as the tuner does (infeasible: PRUNED); the TPE baseline stays bare.
        frozen = (tell_outcome(study, trial, outcome) if kind == "tool"
                  else study.tell(trial, outcome.values))
        tracker.add(frozen.values, is_feasible(frozen))
        if kind == "tool":
            refine_study(study, problem, trials)
    return tracker.curve


def shares(curves: list[list[float]], budget: int, ref: float) -> list[float]:
    """Each run's best after `budget` trials as a share of the reference."""
    return [c[min(budget, len(c)) - 1] / ref if ref > 0 else 0.0 for c in curves]


def first_reach(curve: list[float], target: float) -> int | None:
    for i, v in enumerate(curve):
        if v >= target:
            return i + 1
    return None


def figure(case: Case, kind: str, budget: int, s: list[float], ref: float, reach: str,
           seeds: int) -> dict[str, Any]:
    """One recorded figure: the median share of the reference after `budget` trials."""
    return {"name": f"{case.title}, {kind}: best @{budget} trials",
            "value": 100 * statistics.median(s),
            "unit": f"% of the reference, median of {seeds} seeds",
            "spread": (100 * min(s), 100 * max(s)),
            # The target is the tool's; plain TPE and random search are the baselines.
            "target": ">= 99 (median and worst)" if kind == "tool" else None,
            "note": f"reference {ref:,.4g}; 99 % reached at trial {reach} (median)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--random-trials", type=int, default=2000)
    ap.add_argument("--ref-restarts", type=int, default=48,
                    help="random plans the reference's descent starts from")
    ap.add_argument("--cases", default=",".join(c.key for c in CASES))
    ap.add_argument("--searches", default="tool",
                    help="which searches to run: tool, tpe, random (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="2 seeds, the main case only")
    ap.add_argument("--no-record", action="store_true", help="do not write runs/*.json")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.cases = 2, "main"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    wanted = args.cases.split(",")
    unknown = set(wanted) - {c.key for c in CASES}
    if unknown:
        ap.error(f"--cases: unknown {sorted(unknown)}; allowed: {[c.key for c in CASES]}")
    rows: list[str] = []
    record = Run("search_quality")
    budgets = sorted({100, args.trials})
    for case in (c for c in CASES if c.key in wanted):
        print(f"{case.title}:", file=sys.stderr)
        pareto = len(compose_case(case).search.objectives) > 1
        start = time.perf_counter()
        ref = reference(case, args.ref_restarts, pareto)
        print(f"  reference {ref:.6g} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        for kind in (k for k in ("tool", "tpe", "random") if k in args.searches.split(",")):
            n = args.random_trials if kind == "random" else max(budgets)
            start = time.perf_counter()
            curves = [run_search(case, kind, seed, n) for seed in range(args.seeds)]
            secs = (time.perf_counter() - start) / args.seeds
            cells = []
            for b in budgets:
                s = shares(curves, b, ref)
                cells.append(f"{100 * statistics.median(s):.1f} | {100 * min(s):.1f}")
            got = sorted(x if x is not None else math.inf
                         for x in (first_reach(c, 0.99 * ref) for c in curves))
            med = statistics.median(got)
            med_txt = f"{med:.0f}" if math.isfinite(med) else f">{n}"
            rows.append(f"| {case.title} | {ref:,.4g} | {kind} | {' | '.join(cells)} | "
                        f"{med_txt} | {secs:.1f} |")
            for b in budgets:
                record.add(**figure(case, kind, b, shares(curves, b, ref), ref, med_txt,
                                    args.seeds))
            print(f"  {kind}: {rows[-1]}", file=sys.stderr)
    unit = "samples/s (pareto: hypervolume, samples/s x headroom share)"
    print(f"\nmedian and worst over {args.seeds} seeds, % of the reference; reference in {unit}\n")
    heads = " | ".join(f"median % @{b} | worst % @{b}" for b in budgets)
    print(f"| case | reference | search | {heads} | trials to 99 % (median) | s per run |")
    print("|---|---:|---|" + "---:|" * (2 * len(budgets) + 2))
    for row in rows:
        print(row)
    if not args.no_record:
        record.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
