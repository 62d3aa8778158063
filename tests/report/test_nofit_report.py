"""A report of a study where no plan fits shows how close the search came, and its trials
table lists the closest plans first."""

from __future__ import annotations

import re
from pathlib import Path

from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_no_fit_report_plots_peak_memory_and_sorts_trials_by_closeness(tmp_path: Path) -> None:
    summary = run(compose([f"results_dir={tmp_path}", "+experiment=seed_resnet101",
                           "workload.micro_batch_size=1024", "plan.precision=32.32",
                           "study.n_trials=8", "study.progress_bar=false"]),
                  frozenset({"workload.micro_batch_size", "plan.precision"}))
    assert summary.best_result is None
    html = Path(summary.exports["report"]).read_text()
    assert "No plan fits: peak memory per IPU by trial" in html
    table = html[html.index("Top 50 trials"):]
    table = table[table.index("<table"):table.index("</table>")]
    head = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    col = head.index("peak MB/IPU")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)[1:]
    peaks = [float(re.findall(r'data-v="([^"]*)"', r)[col]) for r in rows]
    assert len(peaks) >= 2 and peaks == sorted(peaks)
