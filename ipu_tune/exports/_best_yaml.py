"""`best.yaml`: the best plan in the config schema (model/workload/system/plan) plus provenance.

`ipu_tune.evaluate` ignores the `ipu_tune:` provenance block, so the file evaluates again
unchanged.
"""

from __future__ import annotations

from typing import Any

import yaml

from ipu_tune._escape import printable
from ipu_tune.config import to_plain_dict
from ipu_tune.models import hf_source

from ._context import BEST_YAML, EveryPlan, ExportContext
from ._poprun import poprun_provenance

__all__ = ["BestYamlExporter"]


class BestYamlExporter(EveryPlan):
    """The best plan as a config file that `python -m ipu_tune evaluate` reads again."""

    name = "best"
    file_name = BEST_YAML
    label = "best plan"

    def render(self, ctx: ExportContext) -> str:
        config = to_plain_dict(ctx.config)
        if hf_source(ctx.config.model) is not None:
            # Its input is sized by its config, not by this key (which would say otherwise).
            config["model"].pop("input_shape", None)
        source = config["plan"].get("from_ipu_config")
        if source:
            # The plan holds what the study started from that file and changed: read again,
            # the file would put the starting plan back. Its fields no simulation reads stay
            # in the exported ipu_config.json.
            config["plan"].update(from_ipu_config=None, ipu_config_carried=None)
        body = {k: config[k] for k in ("model", "workload", "system", "plan")}
        text = yaml.safe_dump(body, sort_keys=False, default_flow_style=None)
        if source:  # YAML ends a comment at U+2028 too: the path stays escaped
            text = printable(f"# plan.from_ipu_config was {source!r}: its plan is read into "
                             "this one.") + "\n" + text
        text += yaml.safe_dump({"ipu_tune": _provenance(ctx)}, sort_keys=False)
        p = ctx.provenance
        if p is None:
            return text
        # YAML ends a comment at U+2028, U+2029 and U+0085 too: the path stays escaped.
        head = [f"# ipu-tune best plan of study {p.study}, trial {p.trial}.",
                f"# Evaluate it again with: {p.evaluate}"]
        return "".join(printable(line) + "\n" for line in head) + text


def _provenance(ctx: ExportContext) -> dict[str, Any]:
    """The `ipu_tune:` block: where the plan comes from, its simulated figures, its PopRun line."""
    out: dict[str, Any] = {}
    p = ctx.provenance
    if p is not None:
        out.update(study=p.study, trial=p.trial, storage=p.storage,
                   objectives=dict(p.objectives))
    r = ctx.result
    if r is not None:
        out.update(throughput=r.throughput, fits=r.fits, bottleneck=r.bottleneck)
    if p is not None:
        out.update(simulator_version=p.simulator_version, evaluate=p.evaluate)
    return {**out, **poprun_provenance(ctx)}
