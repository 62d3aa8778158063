"""The one YAML reader: YAML 1.1's number forms read as Hydra reads them, or refused with
the key, never a value Python cannot print nor a time read as a number."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ipu_tune.config import EvalConfig, parse_yaml
from ipu_tune.config._validate import check_limits
from ipu_tune.errors import IpuTuneError

_HUGE = "an integer of more than 4300 digits; allowed: integers of at most 4300 digits"


@pytest.mark.parametrize(("text", "message"), [
    # Powers of two are read without Python's 4300-digit limit: too large to print after.
    ("a: {b: 0x" + "f" * 4000 + "}", "f: a.b='0xffff"),
    ("a: [1, 0b" + "1" * 15000 + "]", "f: a.1='0b1111"),
    ("a: 0" + "7" * 5000, "f: a='07777"),
    ("a: " + "1" * 4301, "f: a='1111"),
    # A key too (an explicit one: a plain key has at most 1024 characters).
    ("? 0x" + "f" * 4000 + "\n: 1", "f: <a key>='0xffff"),
    ("0x" + "f" * 4000, "f='0xfff"),  # the whole document
])
def test_an_integer_of_more_than_4300_digits_in_any_base_is_refused(text: str,
                                                                    message: str) -> None:
    with pytest.raises(IpuTuneError) as err:
        parse_yaml(text, "f")
    assert str(err.value).startswith(message) and _HUGE in str(err.value), str(err.value)


def test_an_integer_just_printable_is_read() -> None:
    top = 10**4300 - 1
    assert parse_yaml(f"a: {hex(top)}", "f") == {"a": top}
    assert parse_yaml(f"a: {top}", "f") == {"a": top}
    with pytest.raises(IpuTuneError, match=_HUGE):
        parse_yaml(f"a: {hex(top + 1)}", "f")


@pytest.mark.parametrize("value", ["1:30", "-1:30", "1:30.5", ":".join(["59"] * 3000)])
def test_a_number_in_base_60_is_refused(value: str) -> None:
    """YAML 1.1 read `micro_batch_size: 1:30` silently as 90."""
    with pytest.raises(IpuTuneError) as err:
        parse_yaml(f"workload: {{micro_batch_size: {value}}}", "f")
    assert str(err.value).startswith("f: workload.micro_batch_size='")
    assert "YAML 1.1 reads a:b as a number in base 60 (1:30 is 90); allowed: quote it" in str(
        err.value)
    assert parse_yaml(f"t: '{value}'", "f") == {"t": value}  # quoted: text


@pytest.mark.parametrize("word", ["yes", "on", "no", "off", "Yes", "ON", "!!bool yes"])
def test_yaml_1_1_boolean_words_are_refused(word: str) -> None:
    """`plan: {eight_bit_io: yes}` turned the switch on in a file, while the command line,
    which reads `yes` as text, refused `plan.eight_bit_io=yes`."""
    with pytest.raises(IpuTuneError) as err:
        parse_yaml(f"plan: {{eight_bit_io: {word}}}", "f")
    bare = word.split()[-1]
    assert str(err.value) == (
        f"f: plan.eight_bit_io={bare!r}: YAML reads an unquoted yes/no/on/off as a boolean "
        "(the command line as text): refused, to mean one thing everywhere; allowed: true or "
        f"false for a switch, or quote it ({bare!r}) for text")
    assert parse_yaml(f"t: '{bare}'", "f") == {"t": bare}  # quoted: text
    assert parse_yaml("a: true\nb: False\nc: TRUE", "f") == {"a": True, "b": False, "c": True}


def test_numbers_read_as_hydra_reads_them() -> None:
    """OmegaConf's loader (Hydra's, for a --config-dir) reads 1e-300 as a number and dates as
    text; PyYAML's reads the first as text and the second as a date no key takes."""
    from omegaconf._utils import get_yaml_loader

    text = "a: 1e-300\nb: 1.5e3\nc: 2001-12-14\nd: 2001-12-14 21:59:43.10 -5\ne: 0x1f\nf: 1_000\n"
    ours = parse_yaml(text, "f")
    assert ours == yaml.load(text, Loader=get_yaml_loader())
    assert ours == {"a": 1e-300, "b": 1500.0, "c": "2001-12-14",
                    "d": "2001-12-14 21:59:43.10 -5", "e": 31, "f": 1000}
    # PyYAML's own loaders are unchanged by ours.
    assert yaml.safe_load("a: 1e-300\nc: 2001-12-14")["a"] == "1e-300"


@pytest.mark.parametrize("tag", ["!!binary aGVsbG8=", "!!timestamp 2001-12-14", "!!set {a: null}",
                                 "!!omap [a: 1]", "!!pairs [a: 1]"])
def test_a_tag_that_makes_a_value_no_key_takes_is_refused(tag: str) -> None:
    with pytest.raises(IpuTuneError) as err:
        parse_yaml(f"a: {{b: {tag}}}", "f")
    assert str(err.value).startswith("f: a.b=") and "which no key takes" in str(err.value)


def test_limits_name_a_huge_integer_given_from_python() -> None:
    """`_short` printed it with repr(): a ValueError from the check meant to refuse it."""
    cfg = EvalConfig()
    cfg = replace(cfg, workload=replace(cfg.workload, micro_batch_size=16**4000 - 1))
    with pytest.raises(IpuTuneError, match=r"workload.micro_batch_size=0xfff.*must be <= 65,536"):
        check_limits(cfg)


_PLAIN = "allowed: plain values (numbers, text, true/false, lists, mappings)"


@pytest.mark.parametrize(("text", "why"), [
    # A tag the safe loader does not know builds nothing: unknown, not a Python object.
    ("a: !custom x", f"an unknown YAML tag !custom; {_PLAIN}, without tags"),
    ("a: !custom\n  b: 1", f"an unknown YAML tag !custom; {_PLAIN}, without tags"),
    ("a: !!foo x", f"an unknown YAML tag !!foo; {_PLAIN}, without tags"),
    ("a: !!python/object/apply:os.system [true]",
     f"the YAML tag !!python/object/apply:os.system builds a Python object; {_PLAIN}"),
    ("a: !!python/name:os.system", f"the YAML tag !!python/name:os.system builds a Python "
                                   f"object; {_PLAIN}"),
    ("? [a]\n: 1", "a list or mapping as a key; allowed: keys that are text or numbers"),
    ("a: {<<: 1}", "a merge key (<<) given no mapping; allowed: <<: a mapping or a list of "
                   "mappings"),
])
def test_what_the_safe_loader_cannot_build_is_said_as_it_is(text: str, why: str) -> None:
    with pytest.raises(IpuTuneError) as err:
        parse_yaml(text, "f")
    assert str(err.value) == f"f: not valid YAML at line 1: {why}"


@pytest.mark.parametrize(("key", "name"), [("model.hf.config_file", "config.json"),
                                           ("plan.from_ipu_config", "ipu_config.json")])
def test_a_json_file_with_a_byte_order_mark_is_refused_as_transformers_refuses_it(
        key: str, name: str, tmp_path: Path) -> None:
    """Transformers (and optimum-graphcore after it) reads these files as plain UTF-8, where
    `json.loads` refuses the mark: one line saying so, not Python's hint to use utf-8-sig."""
    from ipu_tune.exports._ipu_config_read import read_ipu_config
    from ipu_tune.models._config_json import config_json_values

    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"model_type": "bert"}).encode())
    read = config_json_values if name == "config.json" else read_ipu_config
    with pytest.raises(IpuTuneError) as err:
        read(str(path))
    assert str(err.value) == (f"{key}={str(path)!r}: starts with a UTF-8 byte-order mark (BOM), "
                              "which Transformers and optimum-graphcore refuse too; allowed: "
                              "JSON in UTF-8 without a byte-order mark")
