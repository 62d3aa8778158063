"""The exporters, in the order their files are written and listed: one line per framework."""

from __future__ import annotations

from typing import Protocol

from ._best_yaml import BestYamlExporter
from ._context import ExportContext
from ._optimum import IpuConfigExporter, RunWithOptimumExporter
from ._popart import PopArtExporter
from ._poprun import PopRunExporter
from ._poptorch import PopTorchExporter
from ._schedules import Schedules
from ._tf import TensorFlowExporter

__all__ = ["EXPORTERS", "Exporter"]


class Exporter(Protocol):
    """One export of the best plan: a text rendered from the context, written to `file_name`
    beside best.yaml (None: no file of its own; other exports carry the text). An exporter
    whose framework cannot run the best plan's pipeline schedule is given another plan's
    context (`PlanChooser`), whose `stand_in` its header states."""

    @property
    def name(self) -> str: ...  # key in the run summary's exports ("poptorch")

    @property
    def file_name(self) -> str | None: ...

    @property
    def label(self) -> str: ...  # how the run's summary names the file

    @property
    def schedules(self) -> Schedules | None: ...  # the pipeline schedules it runs (None: all)

    def applies(self, ctx: ExportContext) -> bool: ...  # False: no such export of this plan

    def render(self, ctx: ExportContext) -> str: ...


# A new framework: one module with its exporter class, and one line here.
EXPORTERS: tuple[Exporter, ...] = (
    BestYamlExporter(),
    PopTorchExporter(),
    PopArtExporter(),
    TensorFlowExporter(),
    PopRunExporter(),
    IpuConfigExporter(),
    RunWithOptimumExporter(),
)
