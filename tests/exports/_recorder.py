"""A recording stand-in for a framework module: every attribute read, write and call is logged.

`install(monkeypatch, "poptorch", ...)` puts a `Recorder` in `sys.modules` under each name (and
its parents), so an exported program imports it as it would import the framework. Attribute
paths are canonical: calling a class-like name (capitalised) gives an instance whose attributes
hang under the class's path; calling anything else returns the object the method was read from
(the frameworks' setters are chainable). `returns` overrides what a call gives back by path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Log:
    events: list[tuple[str, str, Any]] = field(default_factory=list)
    returns: dict[str, Callable[..., Any]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # constructor path -> instance path
    built: list[Any] = field(default_factory=list)  # real objects the stand-ins built

    def paths(self) -> set[str]:
        return {path for _, path, _ in self.events}

    def calls(self, path: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [value for kind, p, value in self.events if kind == "call" and p == path]

    def sets(self, path: str) -> list[Any]:
        return [value for kind, p, value in self.events if kind == "set" and p == path]

    def only_set(self, path: str) -> Any:
        values = self.sets(path)
        assert len(values) == 1, f"{path} set {len(values)} times: {values}"
        return values[0]

    def only_call(self, path: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        calls = self.calls(path)
        assert len(calls) == 1, f"{path} called {len(calls)} times: {calls}"
        return calls[0]


class Recorder:
    def __init__(self, path: str, log: Log, owner: Recorder | None = None) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_log", log)
        object.__setattr__(self, "_owner", owner)

    def __getattr__(self, name: str) -> Recorder:
        if name.startswith("__"):
            raise AttributeError(name)  # the import system probes dunders
        path = f"{self._path}.{name}"
        self._log.events.append(("get", path, None))
        return Recorder(path, self._log, self)

    def __setattr__(self, name: str, value: Any) -> None:
        self._log.events.append(("set", f"{self._path}.{name}", value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        path = self._path
        self._log.events.append(("call", path, (args, kwargs)))
        if path in self._log.returns:
            return self._log.returns[path](*args, **kwargs)
        if path.rsplit(".", 1)[-1][:1].isupper():
            return Recorder(self._log.aliases.get(path, path), self._log)
        return self._owner if self._owner is not None else self

    def __repr__(self) -> str:
        return self._path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Recorder) and other._path == self._path

    def __hash__(self) -> int:
        return hash(self._path)


def install(monkeypatch: pytest.MonkeyPatch, log: Log, *modules: str) -> None:
    """Make `import <module>` (and of its parents) give recorders sharing `log`."""
    for module in modules:
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            monkeypatch.setitem(__import__("sys").modules, name, Recorder(name, log))


def run_source(source: str, filename: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__export__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def poptorch_model(monkeypatch: pytest.MonkeyPatch, source: str) -> Any:
    """The `model` a PopTorch program builds, run on the CPU with poptorch recorded (its
    pipeline annotations pass the module through): the real module PopTorch would compile."""
    log = Log()
    install(monkeypatch, log, "poptorch", "popdist.poptorch")
    log.returns["poptorch.BeginBlock"] = lambda module, **_: module
    return run_source(source, "poptorch_options.py")["model"]
