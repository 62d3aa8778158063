"""The CLI's tables keep their columns apart whatever the figures: a column is as wide as its
widest cell, not a fixed width that a large figure overflows into its neighbour."""

from __future__ import annotations

import math
import re

import ipu_tune
from ipu_tune.cli.evaluate_format import format_result
from ipu_tune.cli.explain_cmd import format_ladder, format_sensitivity
from ipu_tune.config import load_config
from ipu_tune.explain import Explanation
from ipu_tune.knobs import ModelFacts

_HUGE = {"model": {"name": "resnet50", "input_shape": [3, 1048576, 1048576]},
         "workload": {"micro_batch_size": 65536}}


def _table(text: str, title: str) -> list[str]:
    lines = text.split(title + "\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [ln for ln in lines if not set(ln) <= {"-"}]


def _columns_start_together(lines: list[str]) -> None:
    """Every cell of a row (runs of text two spaces apart) starts (left-aligned) or ends
    (right-aligned) where one header's does, one cell a header at most; an empty cell is
    left out."""
    def cells(line: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S+(?: \S+)*", line)]

    head = cells(lines[0])
    for line in lines[1:]:
        owners = [next((i for i, h in enumerate(head) if h[0] == a[0] or h[1] == a[1]), None)
                  for a in cells(line)]
        assert None not in owners and len(set(owners)) == len(owners), line


def test_evaluate_tables_keep_columns_apart_with_huge_figures() -> None:
    cfg = load_config(_HUGE)
    text = format_result(ipu_tune.evaluate(cfg), cfg)
    (stage,) = _table(text, "Stages per IPU, one micro-batch (ms)")[1:]
    figures = stage.split()[-4:]
    assert all(math.isfinite(float(f)) for f in figures), stage
    assert float(figures[0]) > 1e9  # a figure far past the old fixed width
    for title in ("Time per step by phase", "Memory per IPU (MB, % of the IPU's SRAM)"):
        rows = _table(text, title)
        _columns_start_together(rows)


def _step(step: int, throughput: float, speedup: float) -> dict[str, object]:
    return {"step": step, "change": f"change {step}", "fits": True, "bottleneck": "compute",
            "peak_memory_bytes": 9e20, "memory_limit_bytes": 9.4e8, "throughput": throughput,
            "speedup": speedup, "objective_shown": "", "objective": None}


def test_ladder_and_sensitivity_keep_columns_apart_with_huge_figures() -> None:
    data = Explanation(study="s", objective="throughput", metric="throughput [samples/s]",
                       objectives=(), rule="", model=ModelFacts("image"), start="your plan",
                       ladder_rank="", best_trial=1,
                       steps=(_step(0, 1.0, 1.0), _step(1, 9.9e14, 9.9e14)))
    ladder = format_ladder(data)
    head = next(i for i, ln in enumerate(ladder) if ln.startswith("step"))
    rows = [ladder[head], *ladder[head + 2:head + 4]]
    _columns_start_together(rows)
    assert "990,000,000,000,000" in rows[2]
    sens = format_sensitivity([{"knob": "micro-batch", "value": "[" + "x" * 30 + "]",
                                "fits": True, "valid": True, "throughput": 9.9e14,
                                "change_pct": 9.9e13, "searched": True}])
    _columns_start_together([ln for ln in sens if ln.startswith("  ")])
