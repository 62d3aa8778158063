"""No text quoted by a generated program can change its code.

A stored study is input like any other: whoever shares a journal or a database controls every
trial attribute, such as the bottleneck and reason of the best trial's simulated result, which
the programs quote in their docstring and comments. Each program must stay valid Python whose
only statements are the generator's own, with the quoted text inside the string or comment it
was quoted in (checked on the parsed tree and the tokens, not by eye).
"""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
from pathlib import Path

import pytest
import yaml

import ipu_tune
from ipu_tune.config import EvalConfig
from ipu_tune.exports import EXPORTERS, Provenance, export_context
from ipu_tune.exports._source import docstring, program

from ._export_plans import PLANS, make_config

MARK = "PWNED"
# Each ends a docstring or a comment in its own way, then calls PWNED().
PAYLOADS = [
    f'x"""+{MARK}()+"""',  # closes the docstring: the rest is an expression statement
    f'x""""+{MARK}()+""""',
    f"x\n{MARK}()\n#",  # a newline: ends a comment
    f"x\r{MARK}()\r#",  # so does a carriage return
    f"x\r\n{MARK}()\r\n#",
    f"x\u2028{MARK}()\u2029\x85\x0c",  # line breaks for YAML, editors and str.splitlines
    "bad \\N escape and \\x",  # a docstring with \N or \x does not compile
    "nul \x00 and escape \x1b[2J",  # NUL does not compile; ESC clears a terminal
    'ends in a quote"',
    "\u202egnirts desrever",  # a bidirectional override hides what follows
]
_RAW = ("\r", "\x00", "\x0c", "\x85", "\u2028", "\u2029", "\x1b", "\u202e")


def _python_exports(cfg: EvalConfig, evil: str) -> dict[str, str]:
    """The text of every Python export of `cfg` whose stored result quotes `evil`."""
    result = ipu_tune.evaluate(cfg)
    stages = tuple(dataclasses.replace(s, blocks=(evil, *s.blocks)) for s in result.stages)
    stored = dataclasses.replace(result, bottleneck=evil, reason=evil, fits=False,
                                 stages=stages)
    ctx = export_context(cfg, stored)
    return {e.file_name: e.render(ctx) for e in EXPORTERS
            if e.file_name is not None and e.file_name.endswith(".py") and e.applies(ctx)}


def _check_program(name: str, text: str) -> None:
    tree = ast.parse(text, name)  # valid Python
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert MARK not in names, f"{name}: quoted text became code"
    assert not any(ch in text for ch in _RAW), f"{name}: a raw control or line break"
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME:
            assert tok.string != MARK, f"{name}: {tok.line!r}"


@pytest.mark.parametrize("evil", PAYLOADS)
@pytest.mark.parametrize("plan", ["pipelined-bert", "multi-host"])
def test_a_stored_result_quoted_by_a_program_stays_text(plan: str, evil: str) -> None:
    for name, text in _python_exports(make_config(PLANS[plan]), evil).items():
        _check_program(name, text)
        doc = ast.get_docstring(ast.parse(text), clean=False) or ""
        assert "DOES NOT FIT" in doc  # the reason is still quoted, as text


@pytest.mark.parametrize("evil", PAYLOADS)
def test_comments_and_docstrings_of_any_program_hold_their_text(evil: str) -> None:
    # Every generated program is assembled by `program`, folded or not, with `docstring`.
    for fold in (True, False):
        lines = [*docstring(f"Title {evil}", f"Paragraph {evil}", f"    {evil}"),
                 "import os", f"# short {evil}", "    # " + evil * 20, "x = 1"]
        text = program(lines, fold=fold)
        _check_program("program.py", text)
        tree = ast.parse(text)
        assert [type(s).__name__ for s in tree.body] == ["Expr", "Import", "Assign"]
        # The docstring reads back what was quoted (escaped where it could not stand raw).
        doc = ast.get_docstring(tree, clean=False) or ""
        assert doc.startswith("Title ")
        if evil.isprintable():
            assert evil in doc


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85"])
def test_a_path_in_best_yaml_comments_cannot_add_a_key(tmp_path: Path, brk: str) -> None:
    # PyYAML ends a comment at U+2028, U+2029 and U+0085, which a path may hold.
    cfg = make_config(PLANS["default-study"])
    out = tmp_path / f"r{brk}injected: 1{brk}#" / "s"
    ctx = export_context(cfg, ipu_tune.evaluate(cfg),
                         provenance=Provenance.of("s", 1, "journal", {}, out))
    text = next(e for e in EXPORTERS if e.name == "best").render(ctx)
    assert list(yaml.safe_load(text)) == ["model", "workload", "system", "plan", "ipu_tune"]
    assert yaml.safe_load(text)["ipu_tune"]["evaluate"].endswith(f"{out / 'best.yaml'}'")
