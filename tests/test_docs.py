"""The documentation house: a short README that starts with the two set-up commands, links that
resolve, citations a reader can open, and benchmark figures rendered from recorded runs only."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
FIRST_LINES = [
    "```bash",
    "bash scripts/setup.sh && python -m ipu_tune model=resnet101 search=throughput"
    "   # the main job",
    "bash scripts/setup.sh && python -m pytest"
    "                                      # the tests",
    "```",
]
# Citations a reader of the repository cannot open. Built from pieces so that this file, which
# names them, does not match them itself.
UNOPENABLE = re.compile("|".join([
    r"\bissues?\s+#?\d+", "DESIGN" + r"\.md", r"\bshared" + "/", "land" + "ing",
]), re.IGNORECASE)
SCANNED = ("ipu_tune", "tests", "docs", "benchmarks", "scripts", "conf", "search_spaces")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".json", ".cfg"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _load(name: str) -> ModuleType:
    """A benchmarks/ script as a module (benchmarks/ is not a package)."""
    path = REPO / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in path.read_text().splitlines()
            if line.startswith("#")}


def test_readme_is_at_most_400_lines() -> None:
    assert len(README.read_text().splitlines()) <= 400


def test_readme_starts_with_the_two_set_up_commands() -> None:
    assert README.read_text().splitlines()[:4] == FIRST_LINES


def test_no_citation_a_reader_cannot_open() -> None:
    files = [README, *(p for d in SCANNED for p in sorted((REPO / d).rglob("*"))
                       if p.is_file() and p.suffix in TEXT_SUFFIXES
                       and "__pycache__" not in p.parts)]
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
             for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if UNOPENABLE.search(line)]
    assert found == []


def _resolves(doc: Path, target: str) -> bool:
    """A relative link of `doc` names a file of the repository (and a heading of it, if any)."""
    file_part, _, anchor = target.partition("#")
    path = (doc.parent / file_part).resolve() if file_part else doc
    if not path.is_file() or REPO not in path.parents:
        return False
    return not anchor or path.suffix != ".md" or anchor in _anchors(path)


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves_to_a_file_of_the_repository(doc: Path) -> None:
    links = [t for t in LINK.findall(doc.read_text()) if not re.match(r"[a-z]+:", t)]
    assert links  # the pattern finds this document's links
    assert [t for t in links if not _resolves(doc, t)] == []


def test_the_readme_links_every_doc() -> None:
    text = README.read_text()
    assert [d.name for d in DOCS if f"(docs/{d.name})" not in text] == []


def test_results_md_is_the_rendering_of_the_recorded_runs() -> None:
    write_results = _load("write_results")
    assert (REPO / "benchmarks" / "RESULTS.md").read_text() == write_results.render(
        write_results.load_runs())


def test_every_recorded_benchmark_is_listed_and_every_listed_one_exists() -> None:
    write_results = _load("write_results")
    listed = {b.name for b in write_results.BENCHMARKS}
    assert set(write_results.load_runs()) <= listed
    assert {name for name in listed if not (REPO / "benchmarks" / f"{name}.py").is_file()} == set()


def test_a_recorded_run_keeps_value_spread_load_and_date_and_renders_one_table_per_figure(
        tmp_path: Path) -> None:
    record = _load("_record")
    run = record.Run("simulator_speed")
    run.add("simulate, warm", 19.5, "CPU us per call", spread=(19.5, 21.0), target="< 100")
    run.add("simulate, cold", 101.0, "CPU us per call")
    run.save(tmp_path)
    run.save(tmp_path)
    saved = json.loads((tmp_path / "simulator_speed.json").read_text())
    assert len(saved) == 2
    assert saved[0]["figures"][0]["spread"] == [19.5, 21.0]
    assert len(saved[0]["load_start"]) == 3 and len(saved[0]["load_end"]) == 3
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", saved[0]["date"])
    text = _load("write_results").render({"simulator_speed": saved})
    assert text.count("**simulate, warm**") == 1 and text.count("**simulate, cold**") == 1
    assert text.count("| 19.50 | 19.50 - 21.00 |") == 2  # one row per recorded run
    assert "Not run yet." in text  # the other benchmarks, with no record here


def test_the_layer_count_bound_in_the_docs_is_the_codes() -> None:
    from ipu_tune.models._hf_config import MAX_HF_LAYERS

    text = " ".join((REPO / "docs" / "huggingface.md").read_text().split())
    assert f"must be 1 to {MAX_HF_LAYERS}:" in text
