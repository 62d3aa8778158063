"""Terminal report of one simulated plan, laid out like PopVision's memory and execution reports:
memory by category per IPU against its limit, time per step by phase, the stages, the verdict."""

from __future__ import annotations

from ipu_tune.cli._common import aligned_lines
from ipu_tune.config import EvalConfig
from ipu_tune.knobs import ModelFacts, describe, rate_text
from ipu_tune.simulator import (
    MEMORY_CATEGORIES,
    TIME_PHASES,
    IpuMemory,
    SimResult,
    host_wait_clause,
)

__all__ = ["format_result"]

MB = 1e6


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    - "


def _count(samples: float) -> str:
    """`1 sample`, `64 samples`: a whole number of samples as such; packed sequences (a mean
    per pack) to 0.1, always plural (`1.5 samples`)."""
    if samples == 1:
        return "1 sample"
    return f"{samples:,.0f} samples" if samples == round(samples) else f"{samples:,.1f} samples"


def _header(result: SimResult, cfg: EvalConfig, model: ModelFacts | None) -> list[str]:
    m, w, s, p = cfg.model, cfg.workload, cfg.system, cfg.plan
    name = m._target_ or m.name or "model"  # a factory replaces `name` (its default stays)
    if m.name == "hf" and not m._target_:  # the Transformers model it stands for
        name = f"hf ({m.hf.model_type or m.hf.config_file})"
    per_pack = m.dataset.sequences_per_pack
    packs = "" if per_pack == 1.0 else f" packs of {per_pack:g} sequences"
    lines = [
        f"{name} on {s.num_ipus} x {s.ipu} ({s.servers} host{'s' if s.servers > 1 else ''}): "
        f"{w.mode}, micro-batch {w.micro_batch_size}{packs}, "
        f"{w.optimizer + ', ' if w.mode == 'train' else ''}precision {p.precision}",
        f"plan: {describe(cfg, model)}",
        "",
    ]
    if result.fits:
        lines.append("fits: yes")
        lines.append(
            f"throughput: {rate_text(result.throughput)} "
            f"(without the host's data pipeline {rate_text(result.device_throughput)})"
        )
        if w.mode == "infer":  # outputs come back when the call ends
            per_call = p.device_iterations * w.micro_batch_size
            each = " on each replica" if p.replication_factor > 1 else ""
            noun = "sample" if per_call == 1 else "samples"
            # Synthetic data is made on the IPU: no input crosses from the host, none returns.
            span = ("the call: data made on the IPU, no host transfer"
                    if m.dataset.name == "synthetic"
                    else "inputs on the host to results on the host")
            lines.append(f"latency: {result.latency_s * 1e3:,.3f} ms per call of {per_call:,} "
                         f"{noun}{each} ({span})")
    else:
        lines.append(f"fits: NO - {result.reason}")
        lines.append("throughput: none (a plan that does not fit does not run)")
    lines.append(
        f"step: {result.step_time_s * 1e3:,.2f} ms for {_count(result.samples_per_step)}; "
        f"bottleneck: {result.bottleneck}{_waits_for_host(result)}"
    )
    return lines


def _waits_for_host(result: SimResult) -> str:
    """Why the host's data pipeline bounds the plan, when its `host_preprocess` phase is not the
    largest (`host_wait_clause`, which the exports quote too)."""
    clause = host_wait_clause(result)
    return f" ({clause})" if clause else ""


def _memory(result: SimResult) -> list[str]:
    """Per IPU two columns: MB (kB for the fullest tile) and its share of the limit."""
    if not result.memory:
        return []
    cols = [f"IPU{m.ipu} (stage {m.stage})" for m in result.memory]
    tile_limit = result.memory[0].tile_limit_bytes / 1e3
    label = f"max tile (of {tile_limit:.0f} kB)"

    def row(name: str, cells: list[tuple[str, str]]) -> dict[str, str]:
        out = {"category": name}
        for col, (size, share) in zip(cols, cells, strict=True):
            out[col], out[col + " %"] = size, share
        return out

    def sized(m: IpuMemory, part: float) -> tuple[str, str]:
        return f"{part / MB:.1f}", _pct(part, m.limit_bytes).strip()

    rows = [row(cat, [sized(m, m.categories.get(cat, 0)) for m in result.memory])
            for cat in MEMORY_CATEGORIES]
    rows += [row("total", [sized(m, m.total_bytes) for m in result.memory]),
             row("limit", [(f"{m.limit_bytes / MB:.1f}", "") for m in result.memory]),
             row(label, [(f"{m.max_tile_bytes / 1e3:.1f} kB",
                          _pct(m.max_tile_bytes, m.tile_limit_bytes).strip())
                         for m in result.memory])]
    columns = ["category", *(c for col in cols for c in (col, col + " %"))]
    headers = ["%" if c.endswith(" %") else c for c in columns]
    return ["", "Memory per IPU (MB, % of the IPU's SRAM)",
            *aligned_lines(columns, rows, columns[1:], headers)]


def _time(result: SimResult) -> list[str]:
    total = sum(result.phases.values())
    seconds = {phase: result.phases.get(phase, 0.0) for phase in TIME_PHASES}
    rows = [{"phase": phase, "ms": f"{value * 1e3:.3f}", "share": _pct(value, total)}
            for phase, value in seconds.items()]
    rows.append({"phase": "total", "ms": f"{total * 1e3:.3f}", "share": _pct(total, total)})
    return ["", "Time per step by phase", *aligned_lines(["phase", "ms", "share"], rows,
                                                          ["ms", "share"])]


_STAGE_FIGURES = ("forward", "backward", "recompute", "inter-IPU")


def _stages(result: SimResult) -> list[str]:
    if not result.stages:
        return []
    rows = []
    for st in result.stages:
        first, last = st.blocks[0], st.blocks[-1]
        # The tied head on IPU0 runs as a stage of its own after the last IPU's, numbered as
        # the exports number it (PopTorch's AutoIncrement, PopART's pipelineStage).
        head = len(result.stages) if len(result.stages) > 1 else st.stage
        blocks = ((first if first == last else f"{first} .. {last}")
                  + "".join(f" + {b} (stage {head})" for b in st.also))
        seconds = (st.forward_s, st.backward_s, st.recompute_s, st.inter_ipu_s)
        rows.append({"IPU": str(st.stage), "stage blocks": blocks,
                     **{c: f"{s * 1e3:.3f}" for c, s in zip(_STAGE_FIGURES, seconds, strict=True)}})
    return ["", "Stages per IPU, one micro-batch (ms)",
            *aligned_lines(["IPU", "stage blocks", *_STAGE_FIGURES], rows, _STAGE_FIGURES)]


def format_result(result: SimResult, cfg: EvalConfig, model: ModelFacts | None = None) -> str:
    """The terminal report of `ipu-tune evaluate FILE` (`model`: the model profile's facts,
    which decide the knobs it runs: 8-bit I/O for pixels, ...)."""
    return "\n".join(_header(result, cfg, model) + _memory(result) + _time(result)
                     + _stages(result))
