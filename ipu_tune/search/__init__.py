"""The search: spaces, problem/objectives, warm start, presets and samplers.

The study runner (`ipu_tune.tuner`) builds a `SearchProblem` per study and asks it for
the sampler, the warm-start plans, each trial's outcome and the best trial.
"""

from ipu_tune.search._convergence import Convergence, convergence
from ipu_tune.search._history import HistoryWindow
from ipu_tune.search._local import LocalSearch
from ipu_tune.search._objectives import (
    DIRECTIONS,
    OBJECTIVES,
    Objective,
    change_list,
    count_changes,
    metric_names,
    show_value,
)
from ipu_tune.search._problem import (
    HF_CONFIG_FILE,
    SearchProblem,
    TrialOutcome,
    files_named,
    tell_outcome,
)
from ipu_tune.search._refine import refine_study
from ipu_tune.search._samplers import SAMPLERS, make_sampler
from ipu_tune.search._select import (
    Compromise,
    best_trial,
    compromise,
    front_distances,
    is_feasible,
    pareto_front,
    rank_key,
)
from ipu_tune.search._space import (
    KNOBS,
    KnobSpec,
    SearchSpace,
    is_space_file,
    load_space,
    parse_space,
)
from ipu_tune.search._splits import (
    StageCostModel,
    balanced_split,
    cuts_to_starts,
    even_split,
    stage_loads,
)
from ipu_tune.search._stored import (
    check_stored_cases,
    check_stored_trials,
    check_stored_values,
    stored_config,
    stored_values_fault,
)
from ipu_tune.search._warm import WarmPlan, io_tiles_rule

__all__ = [
    "DIRECTIONS",
    "HF_CONFIG_FILE",
    "KNOBS",
    "OBJECTIVES",
    "SAMPLERS",
    "Compromise",
    "Convergence",
    "HistoryWindow",
    "KnobSpec",
    "LocalSearch",
    "Objective",
    "SearchProblem",
    "SearchSpace",
    "StageCostModel",
    "TrialOutcome",
    "WarmPlan",
    "balanced_split",
    "best_trial",
    "change_list",
    "check_stored_cases",
    "check_stored_trials",
    "check_stored_values",
    "compromise",
    "convergence",
    "count_changes",
    "cuts_to_starts",
    "even_split",
    "files_named",
    "front_distances",
    "io_tiles_rule",
    "is_feasible",
    "is_space_file",
    "load_space",
    "make_sampler",
    "metric_names",
    "pareto_front",
    "parse_space",
    "rank_key",
    "refine_study",
    "show_value",
    "stage_loads",
    "stored_config",
    "stored_values_fault",
    "tell_outcome",
]
