"""``ipu-tune profile MODEL [model.KEY=VALUE ...]``: the per-block profile of a model (params,
FLOPs, activations).

A zoo name starts from its preset, ``conf/model/<name>.yaml``, as ``model=NAME`` does
(``resnet101`` is the seed tutorial's 64x64 CIFAR-10 setting); the options and the
``model.*`` overrides, spelled as on the tuner's command line, change it. ``hf`` with
``model.hf.model_type=TYPE`` profiles a Transformers model; ``--target`` any importable
factory.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ipu_tune.cli._common import ArgumentParser, fail
from ipu_tune.config import (
    EvalConfig,
    ModelConfig,
    check_sweep,
    load_config,
    parse_overrides,
    parse_yaml,
    typed,
    with_model_preset,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.models import ZOO, ModelProfile, profile_model

__all__ = ["build_parser", "main", "model_config", "render_table"]

def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="ipu-tune profile",
        description="Profile a model on the meta device: parameters, FLOPs and activations "
        "per pipeline block (per sample).",
    )
    p.add_argument("model", nargs="*", metavar="MODEL [model.KEY=VALUE ...]",
                   help=f"zoo name ({', '.join(ZOO)}; hf: a Transformers model), then "
                   "overrides of the model section as on the tuner's command line, e.g. "
                   "model.hf.model_type=llama model.sequence_length=512")
    p.add_argument("--target", help="dotted path of a factory returning torch.nn.Module")
    p.add_argument(
        "--input-shape", nargs="+", type=int, metavar="N", help="one sample, e.g. 3 224 224"
    )
    p.add_argument("--num-classes", type=int, metavar="N")
    p.add_argument("--sequence-length", type=int, metavar="N", help="tokens per sample")
    p.add_argument(
        "--kwarg", action="append", default=[], metavar="KEY=VALUE",
        help="keyword argument for the model builder (value parsed as YAML); repeatable",
    )  # fmt: skip
    p.add_argument("--ops", action="store_true", help="list every op, not just the blocks")
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    return p


def model_config(args: argparse.Namespace) -> ModelConfig:
    """The `model:` section the options describe (a zoo name starts from its preset, the
    overrides apply last)."""
    name, overrides = _name_and_overrides(args.model)
    if not name and not args.target:
        raise IpuTuneError("model: missing; give a zoo name (hf with model.hf.model_type=TYPE "
                           "for a Transformers model) or --target dotted.path")
    data: dict[str, Any] = {"name": name}
    if args.target:
        data["_target_"] = args.target
    if args.input_shape:
        data["input_shape"] = args.input_shape
    if args.num_classes is not None:
        data["num_classes"] = args.num_classes
    if args.sequence_length is not None:
        data["sequence_length"] = args.sequence_length
    kwargs: dict[str, Any] = {}
    for item in args.kwarg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise IpuTuneError(f"--kwarg {item!r}: expected KEY=VALUE")
        kwargs[key] = parse_yaml(value, f"--kwarg {key[:80]!r}")
    data["kwargs"] = kwargs  # merged onto the preset's own, key by key
    section = with_model_preset({"model": data})["model"]
    # Typed as the model section of a whole config, so that errors name `model.KEY`.
    return typed(EvalConfig, {"model": _overridden(section, overrides)}).model


def _name_and_overrides(items: Sequence[str]) -> tuple[str | None, list[str]]:
    """The zoo name (`NAME` or `model=NAME`) and the `model.KEY=VALUE` overrides of `items`."""
    def is_name(item: str) -> bool:
        return item.startswith("model=") or ("=" not in item and not item.startswith("~"))

    names = [i.removeprefix("model=") for i in items if is_name(i)]
    if len(names) > 1:
        raise IpuTuneError(f"model: {names[0]!r} and {names[1]!r}; allowed: one zoo name, then "
                           "model.KEY=VALUE overrides")
    overrides = [i for i in items if not is_name(i)]
    for text in overrides:
        if not text.lstrip("~+").startswith("model."):
            raise IpuTuneError(f"override {text!r}: profile takes overrides of the model "
                               "section only; allowed: model.KEY=VALUE")
    return (names[0] if names else None), overrides


def _overridden(section: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`section` (the model's) with Hydra-style `model.KEY=VALUE` overrides applied."""
    if not overrides:
        return section
    from omegaconf import OmegaConf

    plain = OmegaConf.create({"model": section})
    for text, o in zip(overrides, parse_overrides(overrides), strict=True):
        check_sweep(o, text, False, "profile")
        OmegaConf.update(plain, o.key_or_group, o.value(), merge=False, force_add=True)
    data = OmegaConf.to_container(plain)
    assert isinstance(data, dict)
    out: dict[str, Any] = data["model"]
    return out


def _g(flops: float) -> str:
    return f"{flops / 1e9:.4g}"


def render_table(prof: ModelProfile, ops: bool = False) -> str:
    head = (
        f"{prof.name}: input {list(prof.input_shape)} ({prof.input_kind}), "
        f"{prof.num_classes:,} output features (the output's last dimension: classes, a "
        f"vocabulary or a width), {len(prof.ops)} ops, torch {prof.torch_version}"
    )
    cols = ("block", "params", "fwd GFLOP", "bwd GFLOP", "out elems", "saved elems", "peak elems")
    rows: list[tuple[str, ...]] = []
    for b in prof.block_stats:
        rows.append((b.name, f"{b.parameters:,}", _g(b.forward_flops), _g(b.backward_flops),
                     f"{b.output_elements:,}", f"{b.saved_elements:,}",
                     f"{b.max_live_elements:,}"))  # fmt: skip
        if ops:
            for o in prof.ops[b.first_op : b.last_op]:
                rows.append((f"  {o.name} [{o.kind}]", f"{o.parameters:,}", _g(o.forward_flops),
                             _g(o.backward_flops), f"{o.output_elements:,}",
                             f"{o.saved_elements:,}", ""))  # fmt: skip
    total = (
        "total", f"{prof.parameters:,}", _g(prof.forward_flops), _g(prof.backward_flops), "",
        f"{sum(b.saved_elements for b in prof.block_stats):,}", "",
    )  # fmt: skip
    widths = [max(len(r[i]) for r in (cols, *rows, total)) for i in range(len(cols))]

    def line(r: Sequence[str]) -> str:
        first = r[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True))])

    rule = "-" * len(line(cols))
    body = [line(r) for r in rows]
    notes = "per sample; out elems = what crosses to the next block; peak = forward working set"
    return "\n".join([head, line(cols), rule, *body, rule, line(total), notes])


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        mc = model_config(args)
        load_config(EvalConfig(model=mc))  # the config's range and LIMITS checks of model.*
        prof = profile_model(mc)
    except IpuTuneError as exc:
        return fail(str(exc), exc.fault)
    if args.json:
        data = prof.to_dict()
        data["backward_flops"] = prof.backward_flops
        if not args.ops:
            del data["ops"]
        print(json.dumps(data, indent=2))
    else:
        print(render_table(prof, ops=args.ops))
    return 0
