"""Text from outside (a stored study, a config file, a path) made safe for where it is written.

One function per kind of output, used by every writer of that kind; no imports of the package
(writers at every layer use it):

- `printable`: a terminal line, a comment of generated code or of a YAML file: every character
  that is not printable (a newline, a carriage return, NUL, an escape, the line separators
  U+2028/U+2029/U+0085 that YAML and editors break lines at, a bidirectional override) is
  written as its Python escape (`\\n`, `\\u2028`), so a value can neither end the line it is
  quoted in nor hide what follows it.
- `docstring_text`: text inside a generated `\"\"\"docstring\"\"\"`: `printable`, with its
  backslashes doubled (a `\\N` or `\\x` would not compile) and no three quotes in a row (they
  would end the docstring and start code).
- `spreadsheet_cell`: a CSV cell a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, a
  tab or a carriage return first) is prefixed with `'`, which spreadsheets show as text.
- `plotly_text`: text Plotly.js draws (a title, a tick label, a legend or trace name, an
  annotation, hover text, customdata a hover template shows). Plotly.js reads HTML in it
  (`<a href>` becomes a link, `<span style>` styles, `<br>`, `<b>`, `<sub>`), `%{...}` in a hover
  template as a field of the point, and `$...$` as TeX when MathJax is loaded; it decodes
  entities last, into literal text. So `&`, `<` and `>` are written as `&amp;`, `&lt;`,
  `&gt;` and `%`, `$` as `&#37;`, `&#36;`: no tag, field or TeX span can form, and the text is
  drawn as it was (Plotly.js knows few named entities: `&quot;` would show as it is written,
  so quotes are left alone).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["docstring_text", "plotly_text", "printable", "spreadsheet_cell"]

_QUOTE_RUN = re.compile(r'"(?="")')  # a quote followed by two more
_FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")
# One pass: each `&` of the text becomes `&amp;`, so each entity Plotly.js decodes is one written
# here, and it decodes each once.
_PLOTLY = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "%": "&#37;", "$": "&#36;"})


def printable(text: object) -> str:
    """`text` with every non-printable character written as its escape (`\\x1b`, `\\n`)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in str(text))


def docstring_text(text: str) -> str:
    """`text` as it can stand inside a triple-double-quoted docstring, read back unchanged."""
    return _QUOTE_RUN.sub(r'\\"', printable(text).replace("\\", "\\\\"))


def spreadsheet_cell(value: Any) -> Any:
    """`value`, with a text a spreadsheet would evaluate as a formula made plain text."""
    if isinstance(value, str) and value.startswith(_FORMULA_FIRST):
        return "'" + value
    return value


def plotly_text(text: object) -> str:
    """`text` as Plotly.js draws it literally, in any text field, hover templates included."""
    return str(text).translate(_PLOTLY)
