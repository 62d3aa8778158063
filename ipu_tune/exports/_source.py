"""Layout of generated Python: wrapped comments and calls, a docstring, one knob with its reason.

Every generated program is assembled here (`program`), and every text it quotes (a stored
result's bottleneck, a module name, a path) stays inside the comment or docstring it is quoted
in: comments and docstrings are escaped by `ipu_tune._escape`, whatever their source.
"""

from __future__ import annotations

import textwrap

from ipu_tune._escape import docstring_text, printable

__all__ = ["WIDTH", "docstring", "knob", "program", "wrap"]

WIDTH = 99  # PEP 8 / ruff line length of the generated files


def _top_level_args(args: str) -> list[str]:
    """Split a call's argument text at the commas outside brackets and quotes."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(args):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    parts.append(args[start:].strip())
    return parts


def _comment(line: str) -> str:
    """A comment line with no character that could end it or hide what follows (a newline,
    `\\r`, NUL, U+2028): each is written as its escape. Other lines are left as they are."""
    body = line.lstrip(" ")
    if not body.startswith("#"):
        return line
    return line[: len(line) - len(body)] + printable(body)


def wrap(lines: list[str]) -> list[str]:
    """Wrap long comments and calls so the program reads like hand-written code; comment lines
    are escaped first (`_comment`)."""
    out: list[str] = []
    for line in map(_comment, lines):
        indent = line[: len(line) - len(line.lstrip())]
        body = line.strip()
        if len(line) <= WIDTH:
            out.append(line)
        elif body.startswith("# "):
            out += textwrap.wrap(
                body[2:],
                WIDTH - len(indent) - 2,
                initial_indent=indent + "# ",
                subsequent_indent=indent + "# ",
                break_on_hyphens=False,
                break_long_words=False,
            )
        elif body.endswith(")") and "(" in body and ", " in body and "#" not in body:
            # One argument per line: `f(a, b=1)` -> `f(\n    a,\n    b=1,\n)`.
            head, _, args = body[:-1].partition("(")
            out.append(f"{indent}{head}(")
            for arg in _top_level_args(args):
                inner = wrap([f"{indent}    {arg}"])  # a nested call may need wrapping too
                out += [*inner[:-1], inner[-1] + ","]
            out.append(f"{indent})")
        else:
            out.append(line)
    return out


def docstring(title: str, *paragraphs: str) -> list[str]:
    """A module docstring: the title line(s), then wrapped paragraphs, each escaped
    (`ipu_tune._escape.docstring_text`: no quote or backslash in them can end it)."""
    lines = ['"""' + "\n".join(textwrap.wrap(docstring_text(title), WIDTH - 3))]
    for text in paragraphs:
        # Indented paragraphs are commands to copy: kept as they are.
        safe = docstring_text(text)
        body = [safe] if text.startswith("    ") else textwrap.wrap(safe, WIDTH)
        lines += ["", *body]
    return [*lines, '"""']


def knob(reason: str, *code: str) -> list[str]:
    """One knob: its reason as a comment (cited), then the statement(s) that set it."""
    return [f"# {reason}", *code]


def program(lines: list[str], fold: bool = True) -> str:
    """The text of a generated Python file: its lines, comment lines escaped (`_comment`) and,
    with `fold`, long comments and calls wrapped (`wrap`)."""
    return "\n".join(wrap(lines) if fold else [_comment(line) for line in lines]) + "\n"
