"""Package boundaries: the import layers (import-linter) and no private module across packages."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ipu_tune"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import of ipu_tune, `from a import b` as `a.b`."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return [(line, name) for line, name in out if name.split(".")[0] == "ipu_tune"]


def _private_owner(name: str) -> str | None:
    """The package owning the first private part of `name` (None: nothing private in it)."""
    parts = name.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def cross_package_private_imports(root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, name in _imported(tree):
            owner = _private_owner(name)
            if owner is None or owner == "ipu_tune":  # the root's own privates (ipu_tune._api)
                continue
            if not (module == owner or module.startswith(owner + ".")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    return bad


def test_no_module_imports_another_package_private_module() -> None:
    assert cross_package_private_imports() == []


def test_the_private_import_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "ipu_tune"
    (pkg / "search").mkdir(parents=True)
    (pkg / "search" / "__init__.py").write_text("")
    (pkg / "search" / "_x.py").write_text(
        "from ipu_tune.simulator._memory import stash_depth\n"
        "from ipu_tune.search._codec import Codec\n"  # its own package: allowed
        "import ipu_tune.models._profile\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        bad = cross_package_private_imports(pkg)
    finally:
        ROOT = saved
    assert bad == ["ipu_tune/search/_x.py:1: ipu_tune.simulator._memory.stash_depth",
                   "ipu_tune/search/_x.py:3: ipu_tune.models._profile"]


def test_import_layers_hold() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.fail("lint-imports not installed: pip install -e '.[test]' (import-linter)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 400


def oversized(root: Path = PACKAGE) -> list[str]:
    """Files over MAX_FILE_LINES and functions over MAX_FUNCTION_LINES (decorators excluded,
    docstrings included) in `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found.append(f"{path.relative_to(root.parent)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                                 f"{node.name} has {length} lines")
    return found


def test_no_function_over_60_lines_and_no_file_over_400_lines() -> None:
    assert oversized() == []


def test_the_size_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (pkg / "long.py").write_text(f"def f() -> None:\n{body}\n" + "\n" * 400)
    assert [line.split(": ", 1)[1] for line in oversized(pkg)] == [
        f"{len((pkg / 'long.py').read_text().splitlines())} lines", "f has 62 lines"]


def _imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The package's modules `module` imports (absolute and relative, at any depth)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        out |= {n for n in names if n in known and n != module}
    return out


def mutual_imports(root: Path = PACKAGE) -> list[tuple[str, str]]:
    """Pairs of modules that import each other (a circle of two)."""
    paths = {_module_name(p): p for p in root.rglob("*.py")}
    graph = {m: _imports_of(p, m, set(paths)) for m, p in paths.items()}
    return sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph[b])


def test_no_two_modules_import_each_other() -> None:
    assert mutual_imports() == []
