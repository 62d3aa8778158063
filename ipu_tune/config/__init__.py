"""Typed configuration: the schema of the configuration file (README, "The config
schema") as dataclasses.

The same schema serves the exported best config, `ipu_tune.evaluate` input and the tuner's
fixed settings. Hydra composes `conf/` against these dataclasses (registered in the
ConfigStore); everything inward of the entry points receives these typed objects, never a
`DictConfig`.
"""

import sys

from ipu_tune.config._compose import compose, hydra_error, quick_compose
from ipu_tune.config._hydra import (
    CONF_DIR,
    GROUPS,
    SPACES_DIR,
    check_override_text,
    check_sweep,
    group_options,
    parse_overrides,
    register,
    split_hydra_args,
)
from ipu_tune.config._load import (
    check_trusted,
    load_config,
    load_unvalidated,
    read_config_file,
    section_mapping,
    to_plain_dict,
    typed,
)
from ipu_tune.config._messages import GIVEN_OVERRIDES, omegaconf_error
from ipu_tune.config._old_defaults import fill_old_defaults, forget_old_defaults
from ipu_tune.config._presets import system_preset, with_model_preset
from ipu_tune.config._schema import (
    DATASET_INPUTS,
    GENERATED,
    SYNTHETIC,
    DatasetConfig,
    EvalConfig,
    HfConfig,
    HostConfig,
    ModelConfig,
    PipelineConfig,
    PlanConfig,
    SamplerConfig,
    SearchConfig,
    StudyConfig,
    SystemConfig,
    TuneConfig,
    WorkloadConfig,
    host_servers,
    hosts_as_servers,
)
from ipu_tune.config._sources import config_files, guarded_loads, header_package
from ipu_tune.config._strings import check_path, check_storage_path
from ipu_tune.config._trust import (
    check_side_doors,
    composed_file_error,
    config_dirs,
    trusted_composition,
)
from ipu_tune.config._validate import (
    LIMITS,
    NAME_MAX_CHARS,
    at_one_proportion_if_moved,
    at_pipeline_minimum,
    check_name,
    check_pinned_layout,
    check_study_name,
    validate,
)
from ipu_tune.config._yaml import (
    parse_json,
    parse_yaml,
    read_json_text,
    read_text,
    read_yaml,
    unique_keys,
)

if "hydra" in sys.modules:  # a script composing with Hydra imported it first: no cost
    register()

__all__ = [
    "CONF_DIR",
    "DATASET_INPUTS",
    "GENERATED",
    "GIVEN_OVERRIDES",
    "GROUPS",
    "LIMITS",
    "NAME_MAX_CHARS",
    "SPACES_DIR",
    "SYNTHETIC",
    "DatasetConfig",
    "EvalConfig",
    "HfConfig",
    "HostConfig",
    "ModelConfig",
    "PipelineConfig",
    "PlanConfig",
    "SamplerConfig",
    "SearchConfig",
    "StudyConfig",
    "SystemConfig",
    "TuneConfig",
    "WorkloadConfig",
    "at_one_proportion_if_moved",
    "at_pipeline_minimum",
    "check_name",
    "check_override_text",
    "check_path",
    "check_pinned_layout",
    "check_side_doors",
    "check_storage_path",
    "check_study_name",
    "check_sweep",
    "check_trusted",
    "compose",
    "composed_file_error",
    "config_dirs",
    "config_files",
    "fill_old_defaults",
    "forget_old_defaults",
    "group_options",
    "guarded_loads",
    "header_package",
    "host_servers",
    "hosts_as_servers",
    "hydra_error",
    "load_config",
    "load_unvalidated",
    "omegaconf_error",
    "parse_json",
    "parse_overrides",
    "parse_yaml",
    "quick_compose",
    "read_config_file",
    "read_json_text",
    "read_text",
    "read_yaml",
    "register",
    "section_mapping",
    "split_hydra_args",
    "system_preset",
    "to_plain_dict",
    "trusted_composition",
    "typed",
    "unique_keys",
    "validate",
    "with_model_preset",
]
