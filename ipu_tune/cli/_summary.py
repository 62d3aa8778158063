"""The end-of-run summary: best throughput, memory per IPU against the limit, plan, exports."""

from __future__ import annotations

from ipu_tune.tuner import RunSummary

__all__ = ["format_summary"]

MB = 1e6
_LABELS = {"best": "best plan", "poptorch": "PopTorch options", "report": "report"}


def format_summary(s: RunSummary) -> str:
    lines = [
        f"study {s.study_name} ({s.storage}): {s.n_complete} finished trials"
        f" ({s.ran_here} run now" + (f", {len(s.retried)} retried" if s.retried else "") + ")",
    ]
    r, c = s.best_result, s.best_config
    if r is None or c is None:
        lines.append("no plan fits: see the report for the memory excess of each trial")
    else:
        lines.append(
            f"best: trial {s.best_trial}, {r.throughput:,.0f} samples/s, bottleneck "
            f"{r.bottleneck}"
        )
        mem = ", ".join(
            f"IPU{i} {b / MB:,.0f}/{r.memory_limit_bytes / MB:,.0f} MB "
            f"({100 * b / r.memory_limit_bytes:.0f}%)"
            for i, b in enumerate(r.memory_per_ipu)
        )
        replicas = c.plan.replication_factor
        per = f" (each of {replicas} replicas)" if replicas > 1 else ""
        lines.append(f"memory per IPU{per}: {mem}")
        p = c.plan
        lines.append(
            f"plan: precision {p.precision}, micro-batch {c.workload.micro_batch_size}, "
            f"GA {p.gradient_accumulation}, DI {p.device_iterations}, replicas "
            f"{p.replication_factor}, splits {list(p.pipeline.splits)} ({p.pipeline.schedule}), "
            f"recompute {p.recompute}, AMP {p.available_memory_proportion:g}, offload "
            f"{p.offload_optimizer_state}, RTS {p.replicated_tensor_sharding}, prefetch "
            f"{p.prefetch_depth}, I/O tiles {p.io_tiles}, 8-bit I/O {p.eight_bit_io}, async "
            f"loader {p.async_dataloader} x{p.dataloader_workers}"
        )
    for key, path in s.exports.items():
        lines.append(f"{_LABELS.get(key, key)}: {path}")
    return "\n".join(lines)
