"""Dataclass schema of the configuration file (README, "The config schema").

These are Hydra structured configs: mutable, OmegaConf-typed (``Optional``/``List``/``Dict``).
Defaults here are the documented defaults of `ipu_tune.evaluate`: PopTorch's own defaults for
every plan knob, and the seed tutorial's model (ResNet-101, CIFAR-10 at 64x64, 10 classes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, make_dataclass
from functools import cache
from typing import (  # noqa: UP035
    TYPE_CHECKING,
    Any,
    ClassVar,
    Dict,
    List,
    Optional,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from ipu_tune.errors import IpuTuneError
from ipu_tune.knobs import GENERATED, KNOBS, SYNTHETIC, Knob

# (OmegaConf reads typing generics: `List[int]`, not `list[int]`.)

IPUS = ("mk1", "mk2", "bow", "c600")


# Dataset names of inputs no data pipeline makes, as benchmarks feed them, whatever
# `preprocess_s_per_sample` says (declared in `ipu_tune.knobs`, which decides what knobs they
# leave moot):
# - synthetic: made on the IPU, no host-device transfer at all (PopTorch
#   `Options.enableSyntheticData`, PopART `SessionOptions.syntheticDataMode`): no host work;
# - generated: random samples made in host memory in the stream's type (no load, augmentation
#   or cast), copied to the IPU each step as real data is.

# Every `model.dataset.name`: the datasets of the model presets and the calibration rows, then
# the two inputs no pipeline makes. A fixed set, because a name is not only a label: a typo of
# `synthetic` would silently simulate a host pipeline, and `cifar10` picks the normalisation the
# PopTorch program applies (`ipu_tune.exports`). Data of your own: the name of its kind
# (`imagenet` for images, `tokens` for token ids), and its cost in `sample_bytes` and
# `preprocess_s_per_sample`.
DATASETS = ("cifar10", "imagenet", "mnist", "openwebtext", "squad", "tokens", "wikipedia",
            SYNTHETIC, GENERATED)
# The input a dataset holds: a model of another input is refused it (`models._build`).
# `tokens` (the `model=hf` preset's, sized by the model), synthetic and generated fit any.
DATASET_INPUTS = {"cifar10": "image", "imagenet": "image", "mnist": "image",
                  "openwebtext": "tokens", "squad": "tokens", "wikipedia": "tokens"}


class _Section:
    """Base of the sections made from the knobs (`workload`, `plan`, `plan.pipeline`).

    Their fields are the knobs of `ipu_tune.knobs`, declared there only: for mypy a knob is any
    attribute; OmegaConf (which reads the generated fields' types) and `validate` check them."""

    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Any]]

        def __init__(self, **knobs: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...


def _hint(k: Knob) -> Any:
    return List[k.item] if k.type is tuple else k.type  # type: ignore[name-defined]  # noqa: UP006


def _knob_field(k: Knob) -> Any:
    return field(default_factory=list) if k.type is tuple else field(default=k.default)


# Settings of a section that are no knob (never searched, not part of the plan): an
# optimum-graphcore ipu_config.json whose plan is the starting plan, and the fields of that
# file no knob reads (set from the file when it is read), which its export carries unchanged.
_NOT_KNOBS: dict[str, tuple[tuple[str, Any], ...]] = {
    "plan": (("from_ipu_config", Optional[str]),  # noqa: UP045
             ("ipu_config_carried", Optional[Dict[str, Any]])),  # noqa: UP006, UP045
}


def _sections() -> dict[str, type]:
    """{dotted section: its dataclass}: one field per knob right below the section, and one per
    subsection where its first knob comes, in the order of `KNOBS` (the order of best.yaml)."""
    made: dict[str, type] = {}

    def build(path: str) -> type:
        prefix, specs, subsections = path + ".", [], set()
        for k in KNOBS:
            if not k.key.startswith(prefix):
                continue
            name, _, below = k.key[len(prefix):].partition(".")
            if not below:
                specs.append((name, _hint(k), _knob_field(k)))
            elif name not in subsections:
                subsections.add(name)
                sub = build(prefix + name)
                specs.append((name, sub, field(default_factory=sub)))
        specs += [(name, hint, field(default=None)) for name, hint in _NOT_KNOBS.get(path, ())]
        cls_name = path.rsplit(".", 1)[-1].capitalize() + "Config"
        made[path] = make_dataclass(cls_name, specs, bases=(_Section,),
                                    namespace={"__module__": __name__})
        return made[path]

    for root in dict.fromkeys(k.key.split(".")[0] for k in KNOBS):
        build(root)
    return made


_SECTIONS = _sections()
if TYPE_CHECKING:
    class WorkloadConfig(_Section): ...
    class PlanConfig(_Section): ...
    class PipelineConfig(_Section): ...
else:  # module-level names: pickling finds the classes by them
    WorkloadConfig = _SECTIONS["workload"]
    PlanConfig = _SECTIONS["plan"]
    PipelineConfig = _SECTIONS["plan.pipeline"]


@dataclass
class DatasetConfig:
    """What the host feeds: one stored sample and its preprocessing (`name: synthetic` or
    `generated`: none; see `SYNTHETIC`)."""

    name: str = "cifar10"
    # Bytes of one stored sample. A token model streams them to the IPU (every input tensor:
    # ids, masks, segment ids as int32); an image streams its pixels in the stream's type, and
    # its stored bytes are not simulated (decoding is `preprocess_s_per_sample`).
    sample_bytes: Optional[int] = None  # noqa: UP045
    # Host seconds to load and augment one sample on one worker (decode, flip, resize); None takes
    # the calibrated default of the host preset.
    preprocess_s_per_sample: Optional[float] = None  # noqa: UP045
    # Packed sequences (Krell et al. 2021, "Efficient Sequence Packing without
    # Cross-contamination"): a token model's input is a pack of this many dataset sequences on
    # average; the micro-batch counts packs, samples/s counts sequences. 1.0: unpacked.
    sequences_per_pack: float = 1.0


@dataclass
class HfConfig:
    """A Hugging Face Transformers model by its configuration (no weights, no download)."""

    # A Transformers model type ("bert", "gpt2", "llama", "vit", "t5", ...) or None.
    model_type: Optional[str] = None  # noqa: UP045
    # A model folder's config.json as downloaded; `config` entries override its values.
    config_file: Optional[str] = None  # noqa: UP045
    # Keyword arguments of the model type's config class (`n_layer: 24`, ...): a mapping or
    # None. Typed Any so that `model.hf.config={n_layer: 24}` sets new keys from the command
    # line (Hydra refuses new keys in a Dict field of a composed config), Optional so that
    # None reads without OmegaConf.
    config: Optional[Any] = None  # noqa: UP045
    # masked-lm | causal-lm | sequence-classification | token-classification |
    # question-answering | image-classification | seq2seq-lm | ... (`ipu_tune.models.TASKS`);
    # None takes the model type's usual head.
    task: Optional[str] = None  # noqa: UP045


# The seed hands-on's input (CIFAR-10 at 64 x 64) and classes: what a model of images reads
# when `model.input_shape` / `model.num_classes` are unset, and what they defaulted to before
# they could be unset (`forget_old_defaults`).
SEED_INPUT_SHAPE = (3, 64, 64)
SEED_NUM_CLASSES = 10


@dataclass
class ModelConfig:
    name: Optional[str] = "resnet101"  # noqa: UP045
    # Dotted path of a factory returning torch.nn.Module; replaces `name` when set.
    _target_: Optional[str] = None  # noqa: UP045
    # None is unset, so that a value given is told from none given (even one equal to the
    # seed setting): a model that reads neither (a Transformers model, a token model) refuses
    # any value, and the zoo's image models and factories read None as the seed setting.
    input_shape: Optional[List[int]] = None  # noqa: UP006, UP045
    num_classes: Optional[int] = None  # noqa: UP045
    sequence_length: Optional[int] = None  # noqa: UP045
    # Keyword arguments for the factory (zoo builders or `_target_`).
    kwargs: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    # Set `hf.model_type` or `hf.config_file` to build a Transformers model (replaces `name`).
    hf: HfConfig = field(default_factory=HfConfig)

    def image_shape(self) -> list[int]:
        """`input_shape`, or the seed setting's 3 x 64 x 64 when unset."""
        return list(self.input_shape) if self.input_shape is not None else list(SEED_INPUT_SHAPE)

    def classes(self) -> int:
        """`num_classes`, or the seed setting's 10 when unset."""
        return self.num_classes if self.num_classes is not None else SEED_NUM_CLASSES


@dataclass
class HostConfig:
    """One host server; None takes the preset (`ipu_tune.hardware.HOST`)."""

    cpu_cores: Optional[int] = None  # noqa: UP045
    network_bytes_per_s: Optional[float] = None  # noqa: UP045  (server to its IPU-Machines)


# IPUs one host server feeds when `system.hosts` is not given: Graphcore's IPU-POD systems as
# its MLPerf runs used them (run_and_time.sh, training_results_v1.1: one server per POD16).
IPUS_PER_HOST_SERVER = 16


def host_servers(num_ipus: int, hosts: int | None) -> int:
    """The host servers of a system: `hosts` if given, else one per `IPUS_PER_HOST_SERVER`
    IPUs (at least one)."""
    return hosts if hosts is not None else max(1, num_ipus // IPUS_PER_HOST_SERVER)


def hosts_as_servers(flat: dict[str, Any]) -> dict[str, Any]:
    """`flat` (a config by dotted keys) with `system.hosts` as the servers it means: wherever
    two configs are compared (a study's fingerprint as it resumes, `compare`, a stored trial
    against its study), `hosts: null` on 16 IPUs is `hosts: 1`, so a study stored when the
    presets stated their servers is the study the presets that leave them to the rule make."""
    ipus, hosts = flat.get("system.num_ipus"), flat.get("system.hosts")
    if isinstance(ipus, int) and (hosts is None or isinstance(hosts, int)):
        return flat | {"system.hosts": host_servers(ipus, hosts)}
    return flat


@dataclass
class SystemConfig:
    ipu: str = "mk2"
    num_ipus: int = 1
    # Host servers; None: one per 16 IPUs (`servers`), as Graphcore's IPU-PODs are built.
    hosts: Optional[int] = None  # noqa: UP045
    host: HostConfig = field(default_factory=HostConfig)

    @property
    def servers(self) -> int:
        """The host servers: `hosts` if given, else one per `IPUS_PER_HOST_SERVER` IPUs."""
        return host_servers(self.num_ipus, self.hosts)


@dataclass
class EvalConfig:
    """The contract schema: one plan of one model on one system."""

    model: ModelConfig = field(default_factory=ModelConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    system: SystemConfig = field(default_factory=SystemConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)


@dataclass
class SearchConfig:
    """A search preset (conf/search/*.yaml) naming its space in search_spaces/."""

    name: str = "throughput"
    space: str = "throughput"
    # throughput | memory | memory_headroom | latency | changes
    objectives: List[str] = field(default_factory=lambda: ["throughput"])  # noqa: UP006
    throughput_floor: Optional[float] = None  # noqa: UP045
    warm_start: bool = True
    # Fix micro_batch_size x gradient_accumulation x replication_factor.
    global_batch_size: Optional[int] = None  # noqa: UP045


@dataclass
class SamplerConfig:
    name: str = "tpe"
    seed: Optional[int] = 0  # noqa: UP045
    params: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006
    # After each finished trial, climb from the best plans on the simulator and enqueue what
    # it finds (`ipu_tune.search.refine_study`); the baseline presets (random, brute force)
    # turn it off, and `false` leaves any sampler to search alone.
    local_search: bool = True


@dataclass
class StudyConfig:
    name: Optional[str] = None  # noqa: UP045
    # Optuna storage URL; None means the journal file `<results_dir>/ipu_tune.journal`.
    storage: Optional[str] = None  # noqa: UP045
    # Total finished trials the study should reach (not "n more").
    n_trials: int = 100
    # Worker processes on this machine sharing the storage (more machines: run the same command).
    workers: int = 1
    timeout_s: Optional[float] = None  # noqa: UP045
    progress_bar: bool = True


@dataclass
class SimulatorConfig:
    # A YAML of simulator constants (`ipu-tune calibrate --output FILE`); None: the defaults.
    constants: Optional[str] = None  # noqa: UP045


@dataclass
class TuneConfig(EvalConfig):
    search: SearchConfig = field(default_factory=SearchConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    study: StudyConfig = field(default_factory=StudyConfig)
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    results_dir: str = "results"


def _field_hints(schema: type) -> list[tuple[str, Any]]:
    """(name, type) of each field of a dataclass schema, Optional[X] read as X."""
    hints = get_type_hints(schema)
    out = []
    for f in dataclasses.fields(schema):
        hint = hints[f.name]
        if get_origin(hint) is Union:
            hint = next(a for a in get_args(hint) if a is not type(None))
        out.append((f.name, hint))
    return out


@cache
def switch_keys(schema: type) -> frozenset[str]:
    """Dotted keys of the schema's true/false fields (`plan.eight_bit_io`, `study.resume`)."""
    out: set[str] = set()
    for name, hint in _field_hints(schema):
        if hint is bool:
            out.add(name)
        elif dataclasses.is_dataclass(hint):
            out |= {f"{name}.{key}" for key in switch_keys(hint)}  # type: ignore[arg-type]
    return frozenset(out)


@cache
def loose_switches(schema: type) -> type:
    """`schema` with every switch typed Any: the node Hydra composes against (`register`).

    Against the schema itself, Hydra's composition hands each file's value to OmegaConf, which
    reads 2, 1, "yes" or "on" as true before the tool sees it (in a file a `defaults:` list pulls
    in, at any depth). Composed against this, the value reaches `typed` as written, which checks
    every switch once (`check_switches`) and then types the config against `schema`."""
    hints = get_type_hints(schema)
    specs: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(schema):
        hint = hints[f.name]
        base = next((a for a in get_args(hint) if a is not type(None)), hint) if get_origin(
            hint) is Union else hint
        if base is bool:
            specs.append((f.name, Any, field(default=f.default)))
        elif dataclasses.is_dataclass(base):
            sub = loose_switches(base)  # type: ignore[arg-type]
            specs.append((f.name, sub, field(default_factory=sub)))
        elif f.default_factory is not dataclasses.MISSING:
            specs.append((f.name, hint, field(default_factory=f.default_factory)))
        else:
            specs.append((f.name, hint, field(default=f.default)))
    return make_dataclass(schema.__name__, specs, namespace={"__module__": __name__})


def check_switch(key: str, value: Any) -> None:
    """A switch takes true or false (or an interpolation OmegaConf resolves). OmegaConf reads
    2, 1, "yes" or "on" as true, so a count or a word given for a switch (`plan.eight_bit_io=2`)
    would turn it on unseen."""
    if value is not None and type(value) is not bool and not (
            type(value) is str and "${" in value):
        raise IpuTuneError(f"{key}={value!r}: allowed: true or false")


def switch_values(schema: type, data: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every switch of `schema` that the mapping `data` holds."""
    if not isinstance(data, Mapping):
        return
    for name, hint in _field_hints(schema):
        key = f"{path}.{name}" if path else name
        if hint is bool and name in data:
            yield key, data[name]
        if dataclasses.is_dataclass(hint):
            yield from switch_values(hint, data.get(name), key)  # type: ignore[arg-type]


def check_switches(schema: type, data: Any, path: str = "") -> None:
    """`check_switch` of every switch of `schema` that the mapping `data` sets."""
    for key, value in switch_values(schema, data, path):
        check_switch(key, value)


def check_resolved_switches(schema: type, plain: Mapping[str, Any], root: str) -> None:
    """A switch set by an interpolation (`plan.eight_bit_io='${study.n_trials}'`) takes true or
    false once resolved too: OmegaConf would read the 100 it resolves to as true."""
    if not any(type(v) is str for _, v in switch_values(schema, plain, root)):
        return
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        resolved = OmegaConf.to_container(OmegaConf.create(dict(plain)), resolve=True)
    except OmegaConfBaseException:
        return  # OmegaConf words it when it types the config
    written = dict(switch_values(schema, plain, root))
    for key, value in switch_values(schema, resolved, root):
        try:
            check_switch(key, value)
        except IpuTuneError:
            raise IpuTuneError(f"{key}={written.get(key)!r} (resolves to {value!r}): allowed: "
                               "true or false") from None
