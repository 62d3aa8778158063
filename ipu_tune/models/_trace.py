"""Trace one training step of a torch model on the meta device into per-op records.

How the numbers are obtained (all from torch itself, nothing estimated):

* FLOPs: the counting functions of `torch.utils.flop_counter.FlopCounterMode`
  (`flop_registry`: 2 FLOPs per multiply-accumulate for convolutions, matmuls and attention;
  other ops count 0, as torch's counter does), applied to each aten call (`_aten.count_flops`,
  with one correction for grouped convolutions). Calling them directly rather than entering
  FlopCounterMode skips its per-module bookkeeping and op decompositions; tests check that the
  totals equal FlopCounterMode's.
* Ops: a leaf module call (no child modules) is one op; outside leaf modules every torch function
  that runs a non-view aten op is one op (residual adds, attention matmuls, softmax), named
  ``<enclosing module>.<function>``. Pure view ops (reshape, flatten, transpose) are not ops.
* Backward: every aten call of the backward pass runs inside an autograd node
  (`torch._C._current_autograd_node`); nodes are numbered in creation order
  (`Node._sequence_nr`), and each op owns the numbers handed out while it ran forward.
* Saved elements: `torch.autograd.graph.saved_tensors_hooks` sees every tensor autograd keeps for
  backward; each storage is counted once, for the op that first saved it. Parameters, buffers
  and storages made from shapes alone (below) are left out: a dropout's random mask (a
  `bernoulli_` noise), which PopART's backward draws again from the step's seed, a causal mask.
* Liveness: every storage an op writes is tracked from its first writer to its last reader in the
  forward pass (inference liveness). This gives the elements that cross a block boundary and the
  peak transient elements inside a block. A storage made from shapes alone (a causal mask built
  from `arange`, position ids, masks of `ones_like(ids)`: no input value or weight flows into
  it) is a constant of the program: live where it is used, but each IPU makes its own, so it
  does not cross a block boundary (Graphcore's GPT-2 keeps its causal mask as a buffer of every
  attention layer; a pipeline stage receives only the hidden states).

The model runs with a batch of `BATCH` samples (BatchNorm needs more than one value per channel
in training mode) and every count is divided back to one sample.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_leaves

from ipu_tune.models._aten import (
    ALIAS_OPS,
    KIND_RANK,
    aten_kind,
    first_tensor,
    matmul_view,
    module_kind,
)
from ipu_tune.models._conv_norm import module_class
from ipu_tune.models._storage_keys import output_key, storage_elements, storage_key
from ipu_tune.models._trace_modes import DispatchRecorder, FunctionScope

__all__ = ["BATCH", "OpRecord", "Trace", "trace_model"]

BATCH = 2

_gseq: Callable[[], int] = torch._C._autograd._get_sequence_nr
_current_node: Callable[[], Any] = torch._C._current_autograd_node


@dataclass
class OpRecord:
    """One op, with counts for the whole traced batch (divided by BATCH later)."""

    name: str
    module: str  # module path the op ran in ("" = the model's own forward)
    seq_start: int  # first autograd sequence number handed out while the op ran forward
    kind: str = "other"
    forward_flops: int = 0
    backward_flops: int = 0
    parameters: int = 0
    output_elements: int = 0
    saved_elements: int = 0
    # Largest matmul/conv of the op: (flops, m for the whole batch, k, n, second operands
    # for the whole batch; `matmul_view`).
    mm: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 1)
    hint: str | None = None  # kind fixed by the leaf module's class
    output_value: int | None = None  # index into Trace.values of the op's output


@dataclass
class _Value:
    """A storage written by an op: elements and first/last op touching it in forward."""

    elements: int
    first: int
    last: int
    # Whether an input value or a weight flows into it (False: made from shapes alone).
    data: bool = True
    first_read: int = -1  # first op other than its writer that reads it; -1: none


# Ops that read only their tensor arguments' shapes, dtypes and devices, not their values.
_SHAPE_ONLY_OPS = frozenset({
    "ones_like", "zeros_like", "empty_like", "full_like", "new_ones", "new_zeros",
    "new_empty", "new_full", "new_empty_strided", "rand_like", "randn_like", "randint_like",
    "scalar_tensor", "arange", "zeros", "ones", "empty", "full",
})


@dataclass
class _Scope:
    """The op being traced: a leaf module call or a torch function outside leaf modules."""

    name: str | None  # None: named after its first aten op
    module: str
    seq_start: int
    hint: str | None = None
    owner: int | None = None  # id() of the leaf module that opened it
    record: int | None = None  # index into records, once a non-view aten op ran


@dataclass
class Trace:
    records: list[OpRecord]
    values: list[_Value]
    module_order: dict[str, int]  # module path -> index of its first op
    output_elements: int  # model output (logits) elements, whole batch
    num_classes: int
    unused_parameters: dict[str, int] = field(default_factory=dict)  # module path -> count
    module_classes: dict[str, str] = field(default_factory=dict)  # path -> `module_class`


class _Tracer:
    def __init__(self, model: nn.Module) -> None:
        self.records: list[OpRecord] = []
        self.values: list[_Value] = []
        self.value_of: dict[int, int] = {}  # storage key -> index into values
        self.saved: set[int] = set()
        self.param_numel: dict[int, int] = {}
        self.param_owner: dict[int, str] = {}
        self.buffers: set[int] = set()
        for mod_name, mod in model.named_modules():
            for p in mod.parameters(recurse=False):
                key = storage_key(p)
                if key not in self.param_numel:
                    self.param_numel[key] = p.numel()
                    self.param_owner[key] = mod_name
            for b in mod.buffers(recurse=False):
                self.buffers.add(storage_key(b))
        self.used_params: set[int] = set()
        self.module_stack: list[str] = []
        self.module_order: dict[str, int] = {}
        # The op being traced: (name or None for "name it after its first aten op", module,
        # seq_start, record index or None until its first non-view aten op).
        self.ctx: _Scope | None = None
        self.pending_saved = 0
        self.paused = False  # aten calls of the harness itself (loss targets) are not ops
        self.backward = False
        self.starts: list[int] = []

    def _is_param(self, t: Tensor) -> bool:
        return storage_key(t) in self.param_numel

    def begin_backward(self) -> None:
        self.backward = True
        self.starts = [r.seq_start for r in self.records]

    # -- op scopes --------------------------------------------------------------------------
    def open(self, name: str | None, module: str, hint: str | None = None) -> None:
        self.ctx = _Scope(name, module, _gseq(), hint)
        self.pending_saved = 0

    def close(self, out: Any) -> None:
        assert self.ctx is not None
        rec_index = self.ctx.record
        if rec_index is not None:
            res, rec = first_tensor(out), self.records[rec_index]
            rec.output_elements = res.numel() if res is not None else 0
            key = None if res is None else output_key(res)
            rec.output_value = None if key is None else self.value_of.get(key)
        elif self.pending_saved and self.records:
            self.records[-1].saved_elements += self.pending_saved
        self.ctx = None

    def _record(self, op_name: str) -> int:
        if self.ctx is None:  # an aten call outside any module or torch function
            self.open(None, self.module_stack[-1] if self.module_stack else "")
            assert self.ctx is not None
            self.ctx.seq_start = max(0, _gseq() - 1)
        ctx = self.ctx
        if ctx.record is None:
            name, module = ctx.name, ctx.module
            if name is None:
                short = op_name.strip("_")
                name = f"{module}.{short}" if module else short
            rec = OpRecord(name=name, module=module, seq_start=ctx.seq_start, hint=ctx.hint)
            self.records.append(rec)
            ctx.record = len(self.records) - 1
            self.records[-1].saved_elements += self.pending_saved
            self.pending_saved = 0
            for prefix in _prefixes(module):
                self.module_order.setdefault(prefix, ctx.record)
        return ctx.record

    # -- module hooks -----------------------------------------------------------------------
    def pre_hook(self, name: str, leaf: bool, module: nn.Module) -> None:
        self.module_stack.append(name)
        if leaf and self.ctx is None:
            self.open(name, name, module_kind(module))
            assert self.ctx is not None
            self.ctx.owner = id(module)

    def post_hook(self, module: nn.Module, out: Any) -> None:
        self.module_stack.pop()
        if self.ctx is not None and self.ctx.owner == id(module):
            self.close(out)

    # -- aten calls -------------------------------------------------------------------------
    def on_aten(self, func: Any, args: tuple[Any, ...], out: Any, flops: int) -> None:
        if self.backward:
            node = _current_node()
            if node is not None and flops and self.records:
                seq = node._sequence_nr()
                i = min(max(bisect.bisect_right(self.starts, seq) - 1, 0), len(self.records) - 1)
                self.records[i].backward_flops += flops
            return
        if self.paused:  # storages of the harness (loss targets) are not activations
            if func.is_view:  # the logits reshaped: still the model's output
                return
            for t in tree_leaves(out):
                if isinstance(t, Tensor):
                    self.value_of.pop(storage_key(t), None)
            return
        op_name = func._overloadpacket.__name__
        outs = [t for t in tree_leaves(out) if isinstance(t, Tensor)]
        if not flops and (not outs or func.is_view or op_name in ALIAS_OPS):
            return
        idx = self._record(op_name)
        rec = self.records[idx]
        kind = aten_kind(op_name)
        if rec.hint is not None:
            rec.kind = rec.hint
        elif kind in KIND_RANK and (
            rec.kind not in KIND_RANK or KIND_RANK.index(kind) < KIND_RANK.index(rec.kind)
        ):
            rec.kind = kind
        rec.forward_flops += flops
        if kind in ("conv", "matmul") and flops > rec.mm[0]:
            rec.mm = (flops, *matmul_view(op_name, args, out, flops, self._is_param))
        read: set[int] = set()
        data = False  # an input value or a weight flows into this op's outputs
        for t in tree_leaves(args):
            if not isinstance(t, Tensor):
                continue
            key = storage_key(t)
            if key in self.param_numel:
                data = True
                if key not in self.used_params:
                    self.used_params.add(key)
                    rec.parameters += self.param_numel[key]
            elif key in self.value_of:
                value = self.values[self.value_of[key]]
                value.last = idx
                if value.first_read < 0 and idx != value.first:
                    value.first_read = idx
                data = data or value.data
                read.add(key)
        if op_name in _SHAPE_ONLY_OPS:
            data = False
        for t in outs:
            key = storage_key(t)
            if key in self.param_numel or key in self.buffers:
                continue
            if key in read:  # in-place update or alias of an input: no new storage
                self.values[self.value_of[key]].data |= data
                continue
            self.value_of[key] = len(self.values)
            self.values.append(_Value(storage_elements(t), idx, idx, data))

    def add_input(self, t: Tensor) -> None:
        self.value_of[storage_key(t)] = len(self.values)
        self.values.append(_Value(storage_elements(t), 0, 0))

    def pack(self, t: Tensor) -> Tensor:
        if self.backward:
            return t
        key = storage_key(t)
        vi = self.value_of.get(key)
        if vi is None or vi in self.saved or not self.values[vi].data:  # (module docstring)
            return t
        self.saved.add(vi)
        elements = self.values[vi].elements
        if self.ctx is not None and self.ctx.record is not None:
            self.records[self.ctx.record].saved_elements += elements
        elif self.ctx is not None:
            self.pending_saved += elements
        elif self.records:
            self.records[-1].saved_elements += elements
        return t


def _prefixes(module: str) -> Iterable[str]:
    parts = module.split(".") if module else []
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def logits_of(out: Any) -> Tensor:
    """The prediction tensor of a model output (a tensor, a tuple, or a dict with 'logits')."""
    if isinstance(out, Tensor):
        return out
    if isinstance(out, dict) and isinstance(out.get("logits"), Tensor):
        return out["logits"]
    logits = getattr(out, "logits", None)
    if isinstance(logits, Tensor):
        return logits
    first = first_tensor(out)
    if first is None:
        raise TypeError(f"the model returned {type(out).__name__} without a tensor")
    return first


class _SumLoss(nn.Module):
    """Stand-in loss for outputs that are not class logits."""

    def forward(self, x: Tensor) -> Tensor:
        return x.float().sum()


def trace_model(model: nn.Module, example: Tensor) -> Trace:
    """Run forward, loss and backward of `model` on `example` (meta device) and record ops."""
    model.train()
    tracer = _Tracer(model)
    handles = []
    classes = {name: module_class(mod) for name, mod in model.named_modules()}
    for name, mod in model.named_modules():
        leaf = next(iter(mod.children()), None) is None
        handles.append(mod.register_forward_pre_hook(_pre(tracer, name, leaf)))
        handles.append(mod.register_forward_hook(_post(tracer)))
    try:
        tracer.add_input(example)
        with (
            DispatchRecorder(tracer),
            torch.autograd.graph.saved_tensors_hooks(tracer.pack, lambda t: t),
        ):
            with FunctionScope(tracer):
                logits = logits_of(model(example))
                out_elements = logits.numel()
                num_classes = int(logits.shape[-1]) if logits.dim() >= 2 else 1
                loss_mod: nn.Module
                if logits.is_floating_point() and logits.dim() >= 2:
                    loss_mod = nn.CrossEntropyLoss()
                    tracer.paused = True
                    target = torch.zeros(logits.shape[:-1], dtype=torch.long, device=logits.device)
                    loss_args: tuple[Tensor, ...] = (
                        logits.reshape(-1, num_classes),
                        target.reshape(-1),
                    )
                    tracer.paused = False
                else:
                    loss_mod = _SumLoss()
                    loss_args = (logits,)
                h1 = loss_mod.register_forward_pre_hook(_pre(tracer, "loss", True))
                h2 = loss_mod.register_forward_hook(_post(tracer))
                handles += [h1, h2]
                loss = loss_mod(*loss_args)
            tracer.begin_backward()
            if loss.requires_grad:
                loss.backward()
    finally:
        for h in handles:
            h.remove()
    unused: dict[str, int] = {}
    for key, numel in tracer.param_numel.items():
        if key not in tracer.used_params:
            owner = tracer.param_owner[key]
            unused[owner] = unused.get(owner, 0) + numel
    return Trace(
        records=tracer.records,
        values=tracer.values,
        module_order=tracer.module_order,
        output_elements=out_elements,
        num_classes=num_classes,
        unused_parameters=unused,
        module_classes=classes,
    )


def _pre(tracer: _Tracer, name: str, leaf: bool) -> Callable[[nn.Module, Any], None]:
    def hook(module: nn.Module, args: Any) -> None:
        tracer.pre_hook(name, leaf, module)

    return hook


def _post(tracer: _Tracer) -> Callable[[nn.Module, Any, Any], None]:
    def hook(module: nn.Module, args: Any, out: Any) -> None:
        tracer.post_hook(module, out)

    return hook
