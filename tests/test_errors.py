"""A value echoed in a message is cut in its middle past `MAX_SHOWN` characters, and a word
that YAML read as a boolean is named so."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.config import load_config
from ipu_tune.errors import MAX_SHOWN, IpuTuneError, bad_value, bound_text, shorten, shown


def test_a_short_value_is_shown_whole() -> None:
    assert shown("resnet50") == "'resnet50'"
    assert str(bad_value("model.name", "nope", "allowed: resnet50")) == (
        "model.name='nope': allowed: resnet50")


def test_a_long_value_keeps_its_start_and_end() -> None:
    value = "a" * 3000 + "END"
    text = str(bad_value("model.name", value, "allowed: resnet50"))
    assert len(text) < 2 * MAX_SHOWN
    assert text.startswith("model.name='aaaa") and "END'" in text
    assert "characters)" in text and text.endswith(": allowed: resnet50")


def test_a_long_list_is_cut_too() -> None:
    assert len(shown([1] * 50000)) <= MAX_SHOWN + 30


def test_shorten_cuts_long_words_only() -> None:
    line = "--results-dir='" + "d" * 5000 + "': no study storage there"
    out = shorten(line)
    assert out.startswith("--results-dir='ddd") and out.endswith("': no study storage there")
    assert len(out) < 2 * MAX_SHOWN
    assert shorten("a b c") == "a b c"


def test_a_password_is_masked_before_a_long_url_is_cut() -> None:
    """A cut through a URL would leave part of its password, which no later redaction finds:
    the password is masked first."""
    url = f"postgresql://{'u' * 300}:topsecretpassword@host/db"
    message = str(bad_value("study.storage", url, "x"))
    assert "characters)" in message and len(message) < MAX_SHOWN + 40
    assert "topsecret" not in message and "password" not in message


def test_a_word_yaml_read_as_a_boolean_is_named_so(tmp_path: Path) -> None:
    # `partials: false` in a YAML file reaches the text field as 'False': the line says why
    # (`partials: off` is refused as the file is read: YAML 1.1's words are no booleans here).
    cfg = tmp_path / "plan.yaml"
    cfg.write_text("model: {name: resnet50}\nsystem: {num_ipus: 1}\nplan: {partials: false}\n")
    with pytest.raises(IpuTuneError) as err:
        load_config(cfg)
    assert str(err.value) == (
        "plan.partials='False': allowed: float, half (an unquoted yes/no/on/off/true/false is "
        "read as a boolean: quote a word meant as text)")
    cfg.write_text("model: {name: resnet50}\nsystem: {num_ipus: 1}\nplan: {partials: off}\n")
    with pytest.raises(IpuTuneError, match=r"plan.partials='off': YAML reads an unquoted"):
        load_config(cfg)
    # A key that takes booleans gets no such hint.
    assert "quote" not in str(bad_value("plan.offload_optimizer_state", "False", "true or false"))


def test_an_integer_python_will_not_print_in_decimal_is_shown_in_hex() -> None:
    """repr() of an integer over 4300 digits is a ValueError: a message naming one (from a
    file's 0x... or from Python code) crashed where it was written."""
    from ipu_tune.errors import safe_repr
    from ipu_tune.knobs import shown as knob_shown

    huge = 16**5000 - 1
    assert safe_repr(huge) == hex(huge)
    assert safe_repr([1, huge]) == f"[1, {hex(huge)}]"
    assert safe_repr({"a": (huge,)}) == f"{{'a': ({hex(huge)})}}"
    assert shown(huge).startswith("0xfff") and "characters)" in shown(huge)
    assert str(bad_value("plan.io_tiles", huge, "allowed: 0")).startswith("plan.io_tiles=0xfff")
    assert knob_shown(huge) == hex(huge) and knob_shown([huge]) == f"[{hex(huge)}]"
    assert knob_shown(10**4000) == str(10**4000)  # printable in decimal: as before


@pytest.mark.parametrize(("bound", "text"), [
    (2**20, "1,048,576"), (float(2**20), "1,048,576"), (2**32 - 1, "4,294,967,295"),
    (1024, "1024"), (10_000, "10,000"), (1e13, "1e+13"), (1e-3, "0.001"), (3600.0, "3600"),
    (1.0000001, "1.0000001"), (0, "0"),
])
def test_a_limit_is_printed_exactly(bound: float, text: str) -> None:
    """`:g` keeps 6 digits: a limit of 2^20 read 1.04858e+06."""
    assert bound_text(bound) == text
