"""The torch modes that feed the tracer (`_trace`): every aten call of forward and backward
(`TorchDispatchMode`), and every torch function called outside a leaf module as one op scope
(`TorchFunctionMode`)."""

from __future__ import annotations

from typing import Any, Protocol

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ipu_tune.models import _aten
from ipu_tune.models._aten import FAST_META, META_KERNELS, count_flops, cpu_on_meta

__all__ = ["DispatchRecorder", "FunctionScope", "Tracer"]


class Tracer(Protocol):
    """What the modes read and call of the tracer."""

    ctx: Any
    backward: bool
    module_stack: list[str]

    def on_aten(self, func: Any, args: tuple[Any, ...], out: Any, flops: int) -> None: ...

    def open(self, name: str | None, module: str, hint: str | None = None) -> None: ...

    def close(self, out: Any) -> None: ...


class DispatchRecorder(TorchDispatchMode):
    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps every mode's __torch_dispatch__ in `torch._disable_dynamo`, a per-call
        # wrapper (and an import of torch._dynamo on first use). Nothing is compiled here.
        return False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        fast = FAST_META.get(func) if _aten.FAST_META_KERNELS and not kwargs else None
        out = fast(*args) if fast is not None else None
        own = META_KERNELS.get(func)
        if own is not None:
            out = own(func, args, kwargs)
        if out is None:
            try:
                out = func(*args, **kwargs)
            except RuntimeError:
                moved = cpu_on_meta(args, kwargs)  # a CPU tensor the model made, beside meta
                if moved is None:
                    raise
                args, kwargs = moved
                out = func(*args, **kwargs)
        self.tracer.on_aten(func, args, out, count_flops(func, args, kwargs, out))
        return out


_DUNDER_INPLACE = {"iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_"}


def _function_name(func: Any) -> str:
    """Short name of a torch function or Tensor method: "matmul", "add", "add_" for ``+=``."""
    raw = str(getattr(func, "__name__", "op"))
    name = raw.strip("_")
    if raw.startswith("__"):
        name = _DUNDER_INPLACE.get(name, name)
        name = {"truediv": "div", "getitem": "index"}.get(name, name)
    return name


class FunctionScope(TorchFunctionMode):
    """Makes every torch function called outside a leaf module one op scope."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        t = self.tracer
        if t.ctx is not None or t.backward:
            return func(*args, **(kwargs or {}))
        module = t.module_stack[-1] if t.module_stack else ""
        short = _function_name(func)
        t.open(f"{module}.{short}" if module else short, module)
        try:
            out = func(*args, **(kwargs or {}))
        except BaseException:
            t.ctx = None
            raise
        if t.ctx is not None:
            t.close(out)
        return out
