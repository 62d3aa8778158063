"""Terminal report of one simulated plan, laid out like PopVision's memory and execution reports:
memory by category per IPU against its limit, time per step by phase, the stages, the verdict."""

from __future__ import annotations

from ipu_tune.config import EvalConfig
from ipu_tune.knobs import describe, rate_text
from ipu_tune.simulator import MEMORY_CATEGORIES, TIME_PHASES, SimResult

__all__ = ["format_result"]

MB = 1e6


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole > 0 else "    - "


def _count(samples: float) -> str:
    """A whole number of samples as such; packed sequences (a mean per pack) to 0.1."""
    return f"{samples:,.0f}" if samples == round(samples) else f"{samples:,.1f}"


def _header(result: SimResult, cfg: EvalConfig, input_kind: str | None) -> list[str]:
    m, w, s, p = cfg.model, cfg.workload, cfg.system, cfg.plan
    name = m.name or m._target_ or "model"
    if m.name == "hf":  # the Transformers model it stands for
        name = f"hf ({m.hf.model_type or m.hf.config_file})"
    per_pack = m.dataset.sequences_per_pack
    packs = "" if per_pack == 1.0 else f" packs of {per_pack:g} sequences"
    lines = [
        f"{name} on {s.num_ipus} x {s.ipu} ({s.servers} host{'s' if s.servers > 1 else ''}): "
        f"{w.mode}, micro-batch {w.micro_batch_size}{packs}, "
        f"{w.optimizer + ', ' if w.mode == 'train' else ''}precision {p.precision}",
        f"plan: {describe(cfg, input_kind)}",
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
            lines.append(f"latency: {result.latency_s * 1e3:,.3f} ms per call of {per_call:,} "
                         f"samples{each} (inputs on the host to results on the host)")
    else:
        lines.append(f"fits: NO - {result.reason}")
        lines.append("throughput: none (a plan that does not fit does not run)")
    lines.append(
        f"step: {result.step_time_s * 1e3:,.2f} ms for {_count(result.samples_per_step)} samples; "
        f"bottleneck: {result.bottleneck}"
    )
    return lines


def _memory(result: SimResult) -> list[str]:
    if not result.memory:
        return []
    cols = [f"IPU{m.ipu} (stage {m.stage})" for m in result.memory]
    width = max(18, *(len(c) + 2 for c in cols))
    lines = ["", "Memory per IPU (MB, % of the IPU's SRAM)",
             f"{'category':<22}" + "".join(f"{c:>{width}}" for c in cols)]
    for cat in MEMORY_CATEGORIES:
        cells = [
            f"{m.categories.get(cat, 0) / MB:9.1f} {_pct(m.categories.get(cat, 0), m.limit_bytes)}"
            for m in result.memory
        ]
        lines.append(f"{cat:<22}" + "".join(f"{c:>{width}}" for c in cells))
    totals = [f"{m.total_bytes / MB:9.1f} {_pct(m.total_bytes, m.limit_bytes)}"
              for m in result.memory]
    limits = [f"{m.limit_bytes / MB:9.1f}       " for m in result.memory]
    tiles = [
        f"{m.max_tile_bytes / 1e3:6.1f} kB {_pct(m.max_tile_bytes, m.tile_limit_bytes)}"
        for m in result.memory
    ]
    lines.append(f"{'total':<22}" + "".join(f"{c:>{width}}" for c in totals))
    lines.append(f"{'limit':<22}" + "".join(f"{c:>{width}}" for c in limits))
    tile_limit = result.memory[0].tile_limit_bytes / 1e3
    label = f"max tile (of {tile_limit:.0f} kB)"
    lines.append(f"{label:<22}" + "".join(f"{c:>{width}}" for c in tiles))
    return lines


def _time(result: SimResult) -> list[str]:
    total = sum(result.phases.values())
    lines = ["", "Time per step by phase", f"{'phase':<22}{'ms':>12}{'share':>9}"]
    for phase in TIME_PHASES:
        value = result.phases.get(phase, 0.0)
        lines.append(f"{phase:<22}{value * 1e3:12.3f}{_pct(value, total):>9}")
    lines.append(f"{'total':<22}{total * 1e3:12.3f}{_pct(total, total):>9}")
    return lines


def _stages(result: SimResult) -> list[str]:
    if not result.stages:
        return []
    names = []
    for st in result.stages:
        first, last = st.blocks[0], st.blocks[-1]
        names.append((first if first == last else f"{first} .. {last}")
                     + "".join(f" + {b}" for b in st.also))  # the tied head on IPU0
    width = max(30, *(len(n) + 2 for n in names))
    lines = ["", "Stages, one micro-batch (ms)",
             f"{'stage':<7}{'blocks':<{width}}{'forward':>10}{'backward':>10}{'recompute':>11}"
             f"{'inter-IPU':>11}"]
    for st, blocks in zip(result.stages, names, strict=True):
        lines.append(
            f"{st.stage:<7}{blocks:<{width}}{st.forward_s * 1e3:10.3f}"
            f"{st.backward_s * 1e3:10.3f}{st.recompute_s * 1e3:11.3f}{st.inter_ipu_s * 1e3:11.3f}"
        )
    return lines


def format_result(result: SimResult, cfg: EvalConfig, input_kind: str | None = None) -> str:
    """The terminal report of `ipu-tune evaluate FILE` (`input_kind`: the model profile's, which
    decides whether 8-bit I/O runs)."""
    return "\n".join(_header(result, cfg, input_kind) + _memory(result) + _time(result)
                     + _stages(result))
