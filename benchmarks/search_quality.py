"""Search quality on the presets' real spaces: the best plan found in N trials vs a reference.

Cases (composed with Hydra exactly as the CLI composes them, the preset's own space file,
continuous and conditional knobs included):

- ``main``: the card's main command, ``model=resnet101 search=throughput``;
- ``seed``: the seed experiment, ``+experiment=seed_resnet101``;
- ``r50``: ResNet-50 on ``system=pod16`` at micro-batch 16 (it fits);
- ``bert``: BERT-Large, sequence length 128, on ``system=pod16`` (16 IPUs: pipeline splits
  and replicas searched);
- ``pareto``: ``model=resnet101 search=pareto`` (throughput vs memory headroom), measured by
  the hypervolume of the feasible front (reference point: 0 samples/s, 0 headroom).

Reference optimum: the best of a large multi-start local search over the simulator
(`ipu_tune.search.LocalSearch`: the warm-start plans and `--ref-starts` seeded random plans,
each climbed to its local optimum, then `--ref-kicks` iterated-local-search kicks of the best),
computed at run time from the simulator, never hard-coded. For ``pareto``: the hypervolume of
every feasible plan met by weighted-sum local searches (8 weightings, each from the warm-start
plans and 5 seeded random plans) and by an epsilon-constraint sweep (at 41 evenly spaced levels
of each objective, the best of the other subject to it, from the best plan known at that
level): about 100,000 simulations.

Searches (in-memory storage; a trial = ask, simulate, tell, as the runner):

- ``tool``: the shipped search: the preset's sampler (conf/sampler/tpe.yaml), the warm start,
  and `refine_study` after every trial (local refinement, iterated-local-search restarts);
- ``tpe``: plain Optuna TPE (default settings), no warm start;
- ``random``: uniform random plans (RandomSampler), no warm start.

Printed: median and worst share of the reference over the seeds after 100 (the default
budget) and 200 trials, and the median trials needed to reach 99 % of it (``>N``: not within
the N trials run; random runs `--random-trials`).

    python benchmarks/search_quality.py [--seeds 5] [--cases main,seed,r50,bert,pareto]
                                        [--searches tool,tpe,random]
    python benchmarks/search_quality.py --quick      # 2 seeds, main only
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _record import Run

from ipu_tune.config import CONF_DIR, TuneConfig, typed
from ipu_tune.hardware import make_system
from ipu_tune.models import profile_model
from ipu_tune.search import (
    LocalSearch,
    SearchProblem,
    is_feasible,
    refine_study,
    tell_outcome,
)


@dataclass(frozen=True)
class Case:
    key: str
    title: str
    overrides: tuple[str, ...]


CASES = (
    Case("main", "main command: ResNet-101, 2 x Mk2, throughput",
         ("model=resnet101", "search=throughput")),
    Case("seed", "seed experiment (ResNet-101 pipelined, 2 x Mk2)",
         ("+experiment=seed_resnet101",)),
    Case("r50", "ResNet-50, POD16, micro-batch 16",
         ("model=resnet50", "system=pod16", "workload.micro_batch_size=16")),
    Case("bert", "BERT-Large seq 128, POD16, micro-batch 8",
         ("model=bert_large", "system=pod16", "workload.micro_batch_size=8")),
    Case("pareto", "pareto: ResNet-101, 2 x Mk2 (hypervolume)",
         ("model=resnet101", "search=pareto")),
)


def make_problem(case: Case, sampler_seed: int = 0) -> SearchProblem:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = typed(TuneConfig, compose(config_name="config", overrides=[
            *case.overrides, f"sampler.seed={sampler_seed}"]))
    profile = profile_model(cfg.model)
    system = make_system(cfg.system.ipu, cfg.system.num_ipus, cfg.system.hosts)
    return SearchProblem(cfg, profile, system)


# -- the measure -------------------------------------------------------------------------------
def hypervolume(points: list[tuple[float, float]]) -> float:
    """Area dominated by (maximised) points above the reference point (0, 0)."""
    area, best_y = 0.0, 0.0
    for x, y in sorted((p for p in points if p[0] > 0 and p[1] > 0), reverse=True):
        if y > best_y:
            area += x * (y - best_y)
            best_y = y
    return area


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
def reference(problem: SearchProblem, starts: int, kicks: int, pareto: bool) -> float:
    if pareto:
        return _pareto_reference(problem, starts)
    ls = LocalSearch(problem, random.Random(12345))
    begin = [w.params for w in problem.warm_plans()]
    begin += [ls.random_params() for _ in range(starts)]
    best = max((ls.climb(p, ls.evals + 50_000) for p in begin), key=lambda sp: sp[0])
    for _ in range(kicks):
        cand = ls.climb(ls.kick(best[1]), ls.evals + 50_000)
        if cand[0] > best[0]:
            best = cand
    print(f"  reference: {ls.evals} simulations, {len(begin)} starts + {kicks} kicks",
          file=sys.stderr)
    return best[0][1] if best[0][0] == 1.0 else 0.0


class _Weighted:
    """A one-objective view of the pareto problem (a weighted sum of the scaled objectives),
    recording every feasible plan it evaluates on both objectives."""

    def __init__(self, problem: SearchProblem, weight: float, scale: float,
                 seen: list[tuple[float, float]]) -> None:
        self.codec = problem.codec
        self.directions = ["maximize"]
        self.objective_names = ["weighted"]
        self._problem, self._w, self._scale, self._seen = problem, weight, scale, seen

    def evaluate(self, cfg: object, note: str = "") -> object:
        out = self._problem.evaluate(cfg, note)  # type: ignore[arg-type]
        v = out.values
        if out.feasible and all(math.isfinite(x) for x in v):
            self._seen.append((v[0], v[1]))
            value = self._w * v[0] / self._scale + (1 - self._w) * v[1]
            return _Out([value], out.constraints, out.result, True)
        return _Out([math.nan if not all(math.isfinite(x) for x in v) else 0.0],
                    out.constraints, out.result, False)


@dataclass(frozen=True)
class _Out:
    values: list[float]
    constraints: list[float]
    result: object
    feasible: bool


def _pareto_reference(problem: SearchProblem, starts: int) -> float:
    seen: list[tuple[float, float]] = []
    scale = 1.0
    for w in problem.warm_plans():
        out = problem.evaluate(w.config)
        if out.feasible:
            scale = max(scale, out.values[0])
    weights = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 1.0]
    for i, weight in enumerate(weights):
        ls = LocalSearch(_Weighted(problem, weight, scale, seen), random.Random(i))  # type: ignore[arg-type]
        begin = [w.params for w in problem.warm_plans()]
        begin += [ls.random_params() for _ in range(max(2, starts // len(weights)))]
        for p in begin:
            ls.climb(p, ls.evals + 20_000)
    weighted = len(seen)
    levels = _epsilon_sweep(problem, seen, scale)
    print(f"  reference: {len(seen)} feasible plans from {len(weights)} weighted local "
          f"searches ({weighted}) and epsilon-constraint climbs at {levels} levels",
          file=sys.stderr)
    return hypervolume(seen)


def _epsilon_sweep(problem: SearchProblem, seen: list[tuple[float, float]],
                   scale: float, steps: int = 40) -> int:
    """Epsilon-constraint climbs (Haimes et al. 1971): at `steps` evenly spaced levels of each
    objective, maximise the other subject to it, from the best plan known at that level."""
    ls = LocalSearch(problem, random.Random(7))
    known: list[tuple[tuple[float, ...], dict[str, object]]] = []

    def record(params: dict[str, object], values: tuple[float, ...]) -> None:
        seen.append((values[0], values[1]))
        known.append((values, params))

    ls.on_feasible = record  # type: ignore[assignment]
    for w in problem.warm_plans():
        ls.score(w.params)
    top = [max(v[k] for v, _ in known) for k in range(2)]
    ls.scales = (scale, 1.0)
    n = 0
    for m, c in ((0, 1), (1, 0)):
        for i in range(steps + 1):
            level = top[c] * i / steps
            ok = [(v, p) for v, p in known if v[c] >= level]
            if not ok:
                continue
            start = max(ok, key=lambda vp: vp[0][m])[1]
            ls.epsilon = (m, c, level)
            ls.climb(start, ls.evals + 5_000)
            top = [max(v[k] for v, _ in known) for k in range(2)]
            n += 1
    return n


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--random-trials", type=int, default=2000)
    ap.add_argument("--ref-starts", type=int, default=40)
    ap.add_argument("--ref-kicks", type=int, default=20)
    ap.add_argument("--cases", default=",".join(c.key for c in CASES))
    ap.add_argument("--searches", default="tool,tpe,random",
                    help="which searches to run (e.g. `tool` after a change to the shipped one)")
    ap.add_argument("--quick", action="store_true", help="2 seeds, the main case only")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.cases = 2, "main"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    wanted = args.cases.split(",")
    rows: list[str] = []
    record = Run("search_quality")
    budgets = (100, args.trials)
    for case in (c for c in CASES if c.key in wanted):
        print(f"{case.title}:", file=sys.stderr)
        problem = make_problem(case)
        pareto = len(problem.directions) > 1
        start = time.perf_counter()
        ref = reference(problem, args.ref_starts, args.ref_kicks, pareto)
        print(f"  reference {ref:.6g} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        reach: dict[str, list[int | None]] = {}
        for kind in (k for k in ("tool", "tpe", "random") if k in args.searches.split(",")):
            n = args.random_trials if kind == "random" else args.trials
            start = time.perf_counter()
            curves = [run_search(case, kind, seed, n) for seed in range(args.seeds)]
            secs = (time.perf_counter() - start) / args.seeds
            reach[kind] = [first_reach(c, 0.99 * ref) for c in curves]
            cells = []
            for b in budgets:
                s = shares(curves, b, ref)
                cells.append(f"{100 * statistics.median(s):.1f} | {100 * min(s):.1f}")
            r = reach[kind]
            got = sorted(x if x is not None else math.inf for x in r)
            med = statistics.median(got)
            med_txt = f"{med:.0f}" if math.isfinite(med) else f">{n}"
            rows.append(f"| {case.title} | {ref:,.4g} | {kind} | {' | '.join(cells)} | "
                        f"{med_txt} | {secs:.1f} |")
            for b in budgets:
                s = shares(curves, b, ref)
                record.add(f"{case.title}, {kind}: best @{b} trials", 100 * statistics.median(s),
                           f"% of the reference, median of {args.seeds} seeds",
                           spread=(100 * min(s), 100 * max(s)),
                           note=f"reference {ref:,.4g}; 99 % reached at trial {med_txt} (median)")
            print(f"  {kind}: {rows[-1]}", file=sys.stderr)
    unit = "samples/s (pareto: hypervolume, samples/s x headroom share)"
    print(f"\nmedian and worst over {args.seeds} seeds, % of the reference; reference in {unit}\n")
    print("| case | reference | search | median % @100 | worst % @100 | median % @"
          f"{args.trials} | worst % @{args.trials} | trials to 99 % (median) | s per run |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    record.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
