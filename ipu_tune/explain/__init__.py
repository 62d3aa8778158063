"""Explain a study: the optimisation ladder, sensitivity of the best, remedies when nothing fits.

`explain_study(study, problem)` returns a frozen `Explanation` (what `ipu-tune explain` prints,
what the summary and the report show: ladder, where the best plan's step goes by phase,
sensitivity, remedies); each part is also usable alone.
"""

from ipu_tune.explain._command import remedy_command
from ipu_tune.explain._ladder import (
    Rank,
    Step,
    differing_keys,
    ladder,
    objective_title,
    rank_by,
    step_row,
)
from ipu_tune.explain._phases import phase_shares
from ipu_tune.explain._remedies import larger_system, override_text, remedies
from ipu_tune.explain._start import SEED_LABEL, START_LABEL, start_label
from ipu_tune.explain._study import (
    INVALID_PLAN,
    PARETO_RULE,
    Closest,
    Explanation,
    closest_trial,
    explain_study,
    invalid_start,
    no_plan_headline,
)
from ipu_tune.explain._whatif import sensitivity

__all__ = [
    "INVALID_PLAN",
    "PARETO_RULE",
    "SEED_LABEL",
    "START_LABEL",
    "Closest",
    "Explanation",
    "Rank",
    "Step",
    "closest_trial",
    "differing_keys",
    "explain_study",
    "invalid_start",
    "ladder",
    "larger_system",
    "no_plan_headline",
    "objective_title",
    "override_text",
    "phase_shares",
    "rank_by",
    "remedies",
    "remedy_command",
    "sensitivity",
    "start_label",
    "step_row",
]
