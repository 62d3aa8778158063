"""The one YAML reader of config, space and constants files: bounded, safe, one-line errors."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ipu_tune.errors import IpuTuneError, shown

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "parse_json",
    "parse_yaml",
    "read_json_text",
    "read_text",
    "read_yaml",
    "unique_keys",
]

# Limits of the one YAML reader: config, space and constants files are a few KiB, 5 levels deep,
# and use no anchors; anything far beyond is an accident or an attack (billion laughs).
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 50
MAX_YAML_NODES = 100_000
# Python reads no decimal integer of more than 4300 digits (nor prints one): an integer of any
# base at or beyond 10**4300 is refused when read, whatever its form (0x..., 0b..., 0o...).
MAX_INT_DIGITS = 4300
_INT_BOUND = 10**MAX_INT_DIGITS
_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"


class _Loader(_BASE):
    """PyYAML's safe loader reading scalars as OmegaConf's loader does (Hydra reads a
    `--config-dir` with it, so a file means the same to both): `1e-300` is a float (YAML 1.1
    wants a dot) and `2001-12-14` text, not a date no key takes. What neither should take is
    built as `_Refused` and refused with its key (`parse_yaml`)."""


# Copies of the lists: adding to them must not change PyYAML's own loaders.
_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in found if tag != _TAG + "timestamp"]
    for ch, found in _BASE.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_TAG + "float", re.compile(r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X), list("-+0123456789."))


@dataclass(frozen=True)
class _Refused:
    """A scalar the reader does not take (`text` as written), and why: refused once the
    whole is read, with the key it is under."""

    text: str
    why: str


_BASE60 = ("YAML 1.1 reads a:b as a number in base 60 (1:30 is 90); allowed: quote it ('1:30') "
           "for text, or write the number")
_HUGE = (f"an integer of more than {MAX_INT_DIGITS} digits; allowed: integers of at most "
         f"{MAX_INT_DIGITS} digits, in any base")


def _int(loader: Any, node: Any) -> Any:
    text = loader.construct_scalar(node)
    if ":" in text:
        return _Refused(text, _BASE60)
    try:
        value = yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:  # over 4300 decimal digits: Python refuses to read them
        return _Refused(text, _HUGE)
    # 0x, 0b and octal digits read without Python's limit, but no message could print them.
    return value if -_INT_BOUND < value < _INT_BOUND else _Refused(text, _HUGE)


# YAML 1.1's other words for true and false. The command line (Hydra's grammar) reads them as
# text, so a switch refuses them there (`plan.eight_bit_io=yes`); in a file YAML would make them
# booleans (`offload_optimizer_state: on` turned the switch on) and a word meant as text became
# 'True'. Refused in every file, as on the command line: one meaning everywhere.
_WORDS = ("YAML reads an unquoted yes/no/on/off as a boolean (the command line as text): refused, "
          "to mean one thing everywhere; allowed: true or false for a switch, or quote it "
          "('{text}') for text")


def _bool(loader: Any, node: Any) -> Any:
    text = loader.construct_scalar(node)
    if text.lower() not in ("true", "false"):
        return _Refused(text, _WORDS.format(text=text))
    return yaml.constructor.SafeConstructor.construct_yaml_bool(loader, node)


def _float(loader: Any, node: Any) -> Any:
    text = loader.construct_scalar(node)
    if ":" in text:
        return _Refused(text, _BASE60)
    return yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)


def _tagged(loader: Any, node: Any) -> Any:
    """`!!timestamp`, `!!binary`, `!!set`, `!!omap`, `!!pairs`: values (dates, bytes, sets,
    pairs) that no key takes and OmegaConf cannot hold."""
    text = node.value if isinstance(node.value, str) else "..."
    kind = node.tag.removeprefix(_TAG)
    return _Refused(text, f"the tag !!{kind} makes a {kind} value, which no key takes; allowed: "
                          "plain values (numbers, text, true/false, lists, mappings)")


_Loader.add_constructor(_TAG + "int", _int)
_Loader.add_constructor(_TAG + "float", _float)
_Loader.add_constructor(_TAG + "bool", _bool)
for _kind in ("timestamp", "binary", "set", "omap", "pairs"):
    _Loader.add_constructor(_TAG + _kind, _tagged)


def _refused(node: Any, path: str) -> Iterator[tuple[str, _Refused]]:
    """(key path, refused value) of every `_Refused` in the data read, keys included."""
    if isinstance(node, _Refused):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, _Refused):  # shown once, as the value of the message
                yield f"{path}.<a key>".lstrip("."), key
            yield from _refused(value, f"{path}.{key}".lstrip("."))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _refused(item, f"{path}.{i}".lstrip("."))


def _check_values(data: Any, name: str) -> Any:
    for path, bad in _refused(data, ""):
        where = f"{name}: {path}" if path else name
        raise IpuTuneError(f"{where}={shown(bad.text)}: {bad.why}")
    return data


def _check_shape(text: str, name: str) -> None:
    """Walk the event stream (no recursion, no construction): depth and nodes after alias
    expansion stay within limits, so neither RecursionError nor a billion laughs can follow;
    and no mapping gives a key twice (safe_load would keep the last one silently)."""
    # Each open collection: [anchor, nodes, its keys so far (mappings only), children done].
    frames: list[list[Any]] = [[None, 0, None, 0]]
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_BASE):
        if isinstance(event, yaml.CollectionStartEvent):
            keys: set[str] | None = set() if isinstance(event, yaml.MappingStartEvent) else None
            frames.append([event.anchor, 1, keys, 0])
            if len(frames) - 1 > MAX_YAML_DEPTH:
                raise IpuTuneError(f"{name}: nested deeper than {MAX_YAML_DEPTH} levels")
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, n = frames.pop()[:2]
        elif isinstance(event, yaml.AliasEvent):
            anchor, n = None, sizes.get(str(event.anchor), 1)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, n = event.anchor, 1
            _check_key(frames[-1], event, name)
        else:
            continue
        if anchor is not None:
            sizes[str(anchor)] = n
        frames[-1][1] += n
        frames[-1][3] += 1
        if frames[-1][1] > MAX_YAML_NODES or sum(f[1] for f in frames) > MAX_YAML_NODES:
            raise IpuTuneError(
                f"{name}: more than {MAX_YAML_NODES} values once aliases are expanded; "
                "allowed: plain YAML without alias bombs")


def _check_key(parent: list[Any], event: Any, name: str) -> None:
    """A scalar in a key position of a mapping (an even child) must be new to that mapping."""
    keys = parent[2]
    if keys is None or parent[3] % 2:
        return
    if event.value in keys:
        raise IpuTuneError(
            f"{name}: key {event.value!r} given twice in one mapping (line "
            f"{event.start_mark.line + 1}); allowed: each key once")
    keys.add(event.value)


def read_text(path: Path, what: str, key: str | None = None) -> str:
    """A regular text file of at most 1 MiB, UTF-8 without NUL bytes; else one line naming
    `what` (or the config `key` that named the file) and the path. Opened without blocking: a
    FIFO would wait for a writer, a device never ends."""
    name = _file_name(path, what, key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise IpuTuneError(f"{name}: not a regular file (a folder, FIFO or device); "
                                   f"allowed: a readable {what}")
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise IpuTuneError(f"{name}: cannot be read ({exc.strerror}); allowed: a readable {what}"
                           ) from None
    if len(raw) > MAX_YAML_BYTES:
        raise IpuTuneError(f"{name}: larger than {MAX_YAML_BYTES} bytes (1 MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IpuTuneError(f"{name}: not a UTF-8 text file") from None
    if "\x00" in text:
        raise IpuTuneError(f"{name}: binary file (NUL bytes); expected text")
    return text


def _file_name(path: Path, what: str, key: str | None) -> str:
    """How a message names a file: the config `key` that named it, else `what` it is."""
    return f"{key}={str(path)!r}" if key else f"{what} {str(path)!r}"


def read_json_text(path: Path, what: str, key: str | None = None) -> str:
    """`read_text` of a JSON file (a Transformers `config.json`, an `ipu_config.json`), refused
    in one line when it starts with a UTF-8 byte-order mark: Transformers and optimum-graphcore
    read these files as plain UTF-8 and `json.loads` refuses the mark, so a file they cannot
    read is not taken here either."""
    text = read_text(path, what, key)
    if text.startswith("\ufeff"):
        raise IpuTuneError(f"{_file_name(path, what, key)}: starts with a UTF-8 byte-order mark "
                           "(BOM), which Transformers and optimum-graphcore refuse too; allowed: "
                           "JSON in UTF-8 without a byte-order mark")
    return text


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file with `parse_yaml`; one-line errors that name `what` ("config file",
    "space file") and the path. Refuses files over 1 MiB and binary or non-UTF-8 files too."""
    return parse_yaml(read_text(path, what), f"{what} {str(path)!r}")


# Python refuses to turn longer digit strings into an int (a ValueError deep in a parser).
_INT_LIMIT = "integer string conversion"


def parse_yaml(text: str, name: str) -> Any:
    """YAML text (a file's, a `--kwarg` value, a CSV cell) as plain data, never constructing
    objects; one line naming `name` on anything bad: not YAML, nesting over 50 levels, alias
    bombs, a key twice, an integer over Python's 4300 digits in any base, a number in base 60
    (`1:30`), YAML 1.1's yes/no/on/off, a tag no key takes (`!!binary`); a date is read as
    text."""
    try:
        _check_shape(text, name)
        return _check_values(yaml.load(text, Loader=_Loader), name)
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # PyYAML 6.0.4 stops at 1000
            raise IpuTuneError(f"{name}: nested deeper than {MAX_YAML_DEPTH} levels") from None
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        if isinstance(exc, yaml.constructor.ConstructorError):
            raise IpuTuneError(f"{name}: not valid YAML{where}: {_unbuilt(exc)}") from None
        raise IpuTuneError(f"{name}: not valid YAML{where}") from None
    except RecursionError:
        raise IpuTuneError(f"{name}: nested deeper than {MAX_YAML_DEPTH} levels") from None
    except ValueError as exc:  # IpuTuneError is one too: only Python's own are reworded
        if isinstance(exc, IpuTuneError) or _INT_LIMIT not in str(exc):
            raise
        raise IpuTuneError(f"{name}: an integer of more than 4300 digits; allowed: integers "
                           "of at most 4300 digits") from None


_NO_TAG = re.compile(r"constructor for the tag '([^']*)'")
_PLAIN = "allowed: plain values (numbers, text, true/false, lists, mappings)"


def _unbuilt(exc: Any) -> str:
    """Why the safe loader built nothing: a `!!python/...` tag (it would build a Python
    object), any other tag it does not know (`!custom`: it builds nothing at all, so it is
    unknown, not dangerous), a list or mapping used as a key, or a merge (`<<:`) of no
    mapping."""
    problem = str(getattr(exc, "problem", ""))
    found = _NO_TAG.search(problem)
    if found is None and "merging" in problem:
        return "a merge key (<<) given no mapping; allowed: <<: a mapping or a list of mappings"
    if found is None:
        return "a list or mapping as a key; allowed: keys that are text or numbers"
    tag = found.group(1)
    shown_tag = "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag
    if tag.startswith(_TAG + "python/"):
        return f"the YAML tag {shown_tag} builds a Python object; {_PLAIN}"
    return f"an unknown YAML tag {shown_tag}; {_PLAIN}, without tags"


def parse_json(text: str) -> Any:
    """JSON text as plain data; ValueError (one line) on bad JSON, a key given twice in one
    object, an integer over 4300 digits or nesting over 50 levels (json's decoder recurses)."""
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    except ValueError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    stack = [(data, 0)]  # depth checked without recursion: later readers walk it recursively
    while stack:
        node, depth = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise ValueError(f"nested deeper than {MAX_YAML_DEPTH} levels")
        children = node.values() if isinstance(node, dict) else node if isinstance(
            node, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return data


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads(text, object_pairs_hook=unique_keys)`: a key given twice in one JSON object
    is a ValueError, as in the YAML files (json keeps the last value silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} given twice in one object; allowed: each key once")
        out[key] = value
    return out
