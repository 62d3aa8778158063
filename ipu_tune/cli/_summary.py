"""The end-of-run summary: the objective by name and unit, memory per IPU, plan, exports.

When no plan fits it leads with the closest plan, by how much and where it overflows, and the
remedies the simulator has checked. The exit status stays 0: a search that found no fitting
plan is a result, not a failure (README "Exit status").
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ipu_tune._redact import without_password
from ipu_tune.cli.explain_cmd import NO_CLOSEST, NO_TRIAL_FINISHED
from ipu_tune.config import GENERATED, SYNTHETIC, EvalConfig
from ipu_tune.explain import Explanation
from ipu_tune.exports import EXPORTERS, export_context, poprun_command
from ipu_tune.knobs import describe, knob_by_field, rate_text
from ipu_tune.search import OBJECTIVES
from ipu_tune.simulator import SimResult
from ipu_tune.tuner import RunSummary

__all__ = ["format_summary"]

MB = 1e6
_LABELS = {**{e.name: e.label for e in EXPORTERS}, "report": "report"}


def _speedup(explanation: Explanation | None) -> str:
    """`; 2.10x your plan's samples/s` (a latency study's: `; 0.31x your plan's latency per
    call (3.788 ms)`), or why there is no such figure."""
    steps = explanation.steps if explanation is not None else ()
    if not steps:
        return ""
    first, last = steps[0], steps[-1]
    if first["bottleneck"] == "invalid plan":
        from ipu_tune.explain import invalid_start

        assert explanation is not None  # it has steps
        return "\n" + invalid_start(explanation)
    if not first["fits"]:
        return "; your plan does not fit"
    if first.get("objective") == "latency":  # compared in what the study minimised
        mine, best = first.get("objective_value") or 0.0, last.get("objective_value") or 0.0
        if first["config"]["workload"]["mode"] != "infer" or mine <= 0.0:
            return "; your plan trains: it has no inference latency to compare"
        return (f"; {best / mine:.2f}x your plan's latency per call "
                f"({OBJECTIVES['latency'].show(mine)})")
    if first["throughput"] > 0:
        return (f"; {last['throughput'] / first['throughput']:.2f}x your plan's samples/s"
                + _host_defaults(first["config"]))
    return ""


_LOADER = (knob_by_field("dataloader_workers"), knob_by_field("async_dataloader"))


def _host_defaults(start: Mapping[str, Any]) -> str:
    """Why a plan read from an ipu_config.json may be far slower than the best: an IPUConfig
    states no host side, so its loader is ipu-tune's defaults (one worker, synchronous)."""
    plan = start["plan"]
    if not plan.get("from_ipu_config") or start["model"]["dataset"]["name"] in (
            SYNTHETIC, GENERATED) or any(plan[k.field] != k.default for k in _LOADER):
        return ""  # no pipeline, or the user set its loader
    return (" (your plan's host side is ipu-tune's defaults, one synchronous loader worker: an "
            "ipu_config.json states none)")


def _objective_line(s: RunSummary) -> str:
    r = s.best_result
    assert r is not None
    names = list(s.objectives) or ["throughput"]
    values = list(s.objectives.values()) or [r.throughput]
    shown = ", ".join(f"{OBJECTIVES[n].title} {OBJECTIVES[n].show(v)}"
                      for n, v in zip(names, values, strict=False) if n in OBJECTIVES)
    extra = []
    if names[0] == "memory":
        extra.append(f"limit {r.memory_limit_bytes / MB:,.1f} MB")
    if "throughput" not in names:
        extra.append(f"throughput {rate_text(r.throughput)}")
    if names[0] == "changes":
        shown = f"{len(s.changes)} change" + ("" if len(s.changes) == 1 else "s")
        if s.changes:
            shown += ": " + ", ".join(s.changes)
    tail = (", " + ", ".join(extra)) if extra else ""
    return (f"best: trial {s.best_trial}, {shown}{tail}, bottleneck {r.bottleneck}"
            f"{_speedup(s.explanation)}")


def _no_fit(s: RunSummary, argv: Sequence[str] | None) -> list[str]:
    """Why there is no best plan: no trial finished, a constraint other than memory, or memory
    (then the remedies checked)."""
    from ipu_tune.cli.explain_cmd import format_remedies

    if s.n_complete == 0:
        return [f"{NO_TRIAL_FINISHED} (the run stopped before its first trial ended, as "
                "study.timeout_s stops it); the same command, without a timeout or with a "
                "longer one, runs them"]
    closest = s.explanation.closest if s.explanation is not None else None
    if closest is None:
        return [NO_CLOSEST]
    return [closest.headline, *format_remedies(closest, argv)]


def format_summary(s: RunSummary, argv: Sequence[str] | None = None) -> str:
    """The summary; `argv` (the command's arguments) makes each no-fit remedy a command."""
    lines = [
        f"study {s.study_name} ({s.storage}): {s.n_complete} finished trials"
        f" ({s.ran_here} run now" + (f", {len(s.retried)} retried" if s.retried else "") + ")",
    ]
    r, c = s.best_result, s.best_config
    if r is None or c is None:
        lines += _no_fit(s, argv)
    else:
        if len(s.objective_names) > 1:
            rule = s.explanation.rule if s.explanation is not None else None
            lines.append("objectives: " + " and ".join(OBJECTIVES[n].metric
                                                       for n in s.objective_names)
                         + (f"; exported {rule}" if rule else ""))
        lines.append(_objective_line(s))
        lines += _host_hint(r, c)
        mem = ", ".join(
            f"IPU{i} {b / MB:,.0f}/{r.memory_limit_bytes / MB:,.0f} MB "
            f"({100 * b / r.memory_limit_bytes:.0f}%)"
            for i, b in enumerate(r.memory_per_ipu)
        )
        replicas = c.plan.replication_factor
        per = f" (each of {replicas} replicas)" if replicas > 1 else ""
        lines.append(f"memory per IPU{per}: {mem}")
        lines.append("plan: " + describe(c, s.model))
        lines.append(_batch_line(c))
        lines += _micro_batch_hint(s, c)
        lines += _partials_hint(s, c)
        command = poprun_command(export_context(c))
        if command is not None:
            lines.append(f"PopRun (host names are placeholders for your servers): {command}")
    if s.convergence is not None and s.convergence.last_improved is not None:
        lines.append(s.convergence.describe())
    for key, path in s.exports.items():
        lines.append(f"{_LABELS.get(key, key)}: {path}")
        # A file holding another plan than the best says which, once per framework: the
        # framework's files (optimum's IPUConfig and program) hold the same plan.
        stand_in = s.stand_ins.get(key)
        if stand_in is not None and f"  {stand_in}" not in lines:
            lines.append(f"  {stand_in}")
    lines.append(_next_line(s))
    return "\n".join(lines)


def _host_hint(r: SimResult, c: EvalConfig) -> list[str]:
    """When the host's data pipeline bounds the best plan: what the host was taken to do per
    sample, and how to say it does less (benchmark inputs, or your own pipeline's cost)."""
    if r.bottleneck != "host_preprocess" or c.model.dataset.name in (SYNTHETIC, GENERATED):
        return []
    per_sample_ms = 1e3 * float(r.extras.get("host_s_per_sample", 0.0))
    stored = "stored pack" if c.model.dataset.sequences_per_pack != 1.0 else "sample"
    return [f"host: the data pipeline bounds this plan (dataset {c.model.dataset.name}, "
            f"{per_sample_ms:.3f} ms of host work per {stored} on one loader worker); inputs "
            f"already prepared: model.dataset.name={GENERATED} (in host memory) or {SYNTHETIC} "
            "(made on the IPU); your own pipeline: model.dataset.preprocess_s_per_sample=SECONDS"]


def _batch_line(c: EvalConfig) -> str:
    """The micro-batch and the global batch the plan trains with (or infers in)."""
    mb, p = c.workload.micro_batch_size, c.plan
    per_pack = c.model.dataset.sequences_per_pack
    unit, packs = ("samples", "") if per_pack == 1.0 else (
        "packs", f"; packs of {per_pack:g} sequences on average: samples/s counts sequences")
    if c.workload.mode != "train":
        return (f"batch: micro-batch {mb}, {mb * p.replication_factor:,} {unit} per step "
                f"over {p.replication_factor} replica(s){packs}")
    total = mb * p.gradient_accumulation * p.replication_factor
    return (f"batch: micro-batch {mb}, global batch {total:,} (micro-batch x GA "
            f"{p.gradient_accumulation} x {p.replication_factor} replica(s)){packs}")


_MICRO_BATCH = knob_by_field("micro_batch_size").key
# A gain below this is within what a plan's other knobs move; not worth a line.
_HINT_MIN_GAIN_PCT = 5.0


def _faster_fitting(s: RunSummary, key: str,
                    wanted: Callable[[Any], bool]) -> Mapping[str, Any] | None:
    """The sensitivity row (what the run simulated around the best plan) that sets `key`,
    which the search did not draw, to a `wanted` value that fits and gains at least
    `_HINT_MIN_GAIN_PCT` of throughput; None for another objective than throughput."""
    if s.explanation is None or (s.objective_names or ("throughput",))[0] != "throughput":
        return None
    return next((r for r in s.explanation.sensitivity
                 if r["key"] == key and not r["searched"] and wanted(r["value"]) and r["fits"]
                 and (r["change_pct"] or 0.0) >= _HINT_MIN_GAIN_PCT), None)


def _micro_batch_hint(s: RunSummary, c: EvalConfig) -> list[str]:
    """When the search stopped at the user's micro-batch (its ceiling) and the best plan with
    a larger one fits and is faster: that figure."""
    row = _faster_fitting(s, _MICRO_BATCH, lambda v: v > c.workload.micro_batch_size)
    if row is None:
        return []
    changes = "the training you asked for" if c.workload.mode == "train" else "each call's latency"
    return [f"micro-batch: {row['value']} gives {rate_text(row['throughput'])} "
            f"({row['change_pct']:+.0f}%) and fits; the search keeps yours, "
            f"{c.workload.micro_batch_size}, as its ceiling (a larger one changes {changes}): "
            f"workload.micro_batch_size={row['value']} to search up to it"]


_PARTIALS = knob_by_field("partials").key


def _partials_hint(s: RunSummary, c: EvalConfig) -> list[str]:
    """When a training plan keeps float partials (a numerics choice the search leaves to the
    user) and half partials fit and are faster: that figure, from the sensitivity the run
    simulated. Graphcore's published recipes run half (MLPerf ResNet-50's
    `enable_half_partials`, the BERT configs, optimum's IPUConfig default), so a user comparing
    the best plan with a published figure needs it in the summary, not only in `explain`."""
    row = _faster_fitting(s, _PARTIALS, lambda v: v == "half")
    if row is None:
        return []
    return [f"partials: half gives {rate_text(row['throughput'])} ({row['change_pct']:+.0f}%) "
            f"and fits, as Graphcore's published recipes run; the search keeps yours, "
            f"{c.plan.partials}, in training (conv/matmul sums in fp16 change the numerics): "
            f"{_PARTIALS}=half to take it"]


def _next_line(s: RunSummary) -> str:
    """What to run next: the ladder of this study, and its report rebuilt."""
    if s.storage == "memory":  # gone with this process: nothing to explain or rebuild later
        return ("next: this study was kept in memory only; leave study.storage unset to keep "
                "it for `explain` and `report`")
    where = ""
    if s.exports:
        folder = next(iter(s.exports.values())).parent.parent
        if folder != Path("results"):
            where = f" --results-dir {shlex.quote(str(folder))}"
    login = ""
    if not s.storage.endswith("ipu_tune.journal"):  # a database: where the study is
        # Printed to be run: a masked password (`alice:***@`) would be sent as `***` and refused.
        url = without_password(s.storage)
        where += f" --storage {shlex.quote(url)}"
        if url != s.storage:  # where the driver finds it: libpq's files for PostgreSQL
            login = ("; the storage's password is left out: " + (
                "libpq reads it from PGPASSWORD or ~/.pgpass" if url.startswith("postgresql")
                else "give it as your database driver reads it outside the URL"))
    if s.best_config is not None and s.best_config.model._target_:
        where += " --trust-remote-code"  # the stored study names the user's own code
    name = shlex.quote(s.study_name)
    report = f"python -m ipu_tune report {name}{where} (rebuild the report)"
    if s.n_complete == 0:  # nothing simulated: `explain` would have nothing to show
        return (f"next: {report}; explain shows a study once one of its trials has finished"
                f"{login}")
    closest = s.explanation.closest if s.explanation is not None else None
    what = ("how this plan was reached, step by step" if s.best_trial is not None else
            "why no plan meets the search's constraints" if closest and closest.missed else
            "why no plan fits, and what was checked to make one fit")
    return f"next: python -m ipu_tune explain {name}{where} ({what}); {report}{login}"
