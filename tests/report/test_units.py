"""One memory unit everywhere: decimal MB (and kB), as the run summary prints it, in the
report and in the exports too."""

from __future__ import annotations

from pathlib import Path

from ipu_tune.cli._summary import format_summary
from ipu_tune.config import compose
from ipu_tune.tuner import run


def test_summary_report_and_exports_use_decimal_megabytes_only(tmp_path: Path) -> None:
    summary = run(compose([f"results_dir={tmp_path}", "study.n_trials=4",
                           "study.progress_bar=false"]))
    texts = {"summary": format_summary(summary)}
    texts.update({key: Path(path).read_text() for key, path in summary.exports.items()
                  if Path(path).suffix in (".py", ".html", ".yaml")})
    assert "report" in texts
    for name, text in texts.items():
        assert "MiB" not in text and "KiB" not in text, name
    assert " MB" in texts["summary"] and " MB" in texts["report"]


def test_memory_categories_keep_their_colour_from_one_report_to_the_next() -> None:
    import ipu_tune
    from ipu_tune.report import CATEGORY_COLORS, memory_figure

    small = ipu_tune.evaluate({"system": {"num_ipus": 1}, "workload": {"micro_batch_size": 8},
                               "plan": {"precision": "16.16"}})
    big = ipu_tune.evaluate({"system": {"num_ipus": 2}, "workload": {"micro_batch_size": 64},
                             "plan": {"pipeline": {"splits": ["layer3.8"]},
                                      "gradient_accumulation": 2,
                                      "offload_optimizer_state": True, "io_tiles": 64}})
    seen: dict[str, str] = {}
    for result in (small, big):
        for trace in memory_figure(result)["data"]:
            colour = trace["marker"]["color"]
            assert colour == CATEGORY_COLORS[trace["name"]]
            assert seen.setdefault(trace["name"], colour) == colour
    assert len(set(CATEGORY_COLORS.values())) == len(CATEGORY_COLORS)
