"""Bad input found by probing the commands from outside (run by tests/cli/test_bad_input.py
with its other cases): before, each was a traceback or was silently read as something else."""

_MODELS = "allowed: one option by name, one of bert_base"
_IN_MEMORY = ("an in-memory SQLite database (no file); allowed: sqlite:///FILE, or memory for a "
              "study of this process only")

# (id, arguments, text the one-line message must contain). `{tmp}`: the test's folder,
# `{study}`: the results folder of a stored study `s`.
PROBE_CASES: list[tuple[str, list[str], str]] = [
    # Hydra raised a bare ValueError (a traceback) for a group option that is no name.
    # `~section` (or any key of the schema): Hydra drops it and the defaults take its place.
    ("delete a section", ["~plan"], "~plan: deletion is not allowed (every key of the schema has"
     " a value); allowed: plan.KEY=VALUE"),
    ("delete a group", ["~system"], "~system: deletion is not allowed"),
    ("delete a top-level key", ["~results_dir"], "allowed: results_dir=VALUE"),
    ("delete a nested section", ["~plan.pipeline"], "allowed: plan.pipeline.KEY=VALUE"),
    ("model null", ["model=null"], f"model=null: {_MODELS}"),
    ("system null", ["system=null"], "system=null: allowed: one option by name, one of bow"),
    ("experiment null", ["+experiment=null"],
     "experiment=null: allowed: one option by name, one of seed_mnist, seed_resnet101"),
    ("model null in a sweep", ["-m", "model=resnet50,null"], f"model=null: {_MODELS}"),
    ("model null with a config dir", ["--config-dir", "{tmp}/exp", "model=null"],
     f"model=null: {_MODELS}"),
    ("system null in evaluate", ["evaluate", "{tmp}/ok.yaml", "system=null"],
     "system=null: allowed: one option by name"),
    # `=1`: Hydra read a group of no name (a bare ValueError); evaluate named the key ''.
    ("no key", ["=1"], "'=1': no key before =; allowed: key=value"),
    ("no key in evaluate", ["evaluate", "{tmp}/ok.yaml", "=1"],
     "'=1': no key before =; allowed: key=value"),
    # Sweeps Hydra cannot list: a traceback (ValueError, "ConfigLoader is not set"), or a list
    # of 10**12 values built before the first run.
    ("range of step 0", ["-m", "system.num_ipus=range(0,3,0)"],
     "'system.num_ipus=range(0,3,0)': a range of step 0; allowed: a step other than 0"),
    ("range of 10**12 values", ["-m", "system.num_ipus=range(1,1000000000000)"],
     "999999999999 values; allowed: at most 1000 values in one sweep"),
    ("float range of 4 million values", ["-m",
                                         "plan.available_memory_proportion=range(0.1,0.5,1e-7)"],
     "4000001 values; allowed: at most 1000 values in one sweep"),
    ("range of no value", ["-m", "system.num_ipus=range(5,1)"],
     "'system.num_ipus=range(5,1)': no values; allowed: 1 to 1000 values"),
    ("glob of a group", ["-m", "model=glob(*)"],
     "'model=glob(*)': Hydra's basic sweeper cannot list these values"),
    # A list inside a typed list, from a file or evaluate's overrides (the command line's own
    # cases are in test_bad_input.py).
    ("a list in the splits of a file", ["evaluate", "{tmp}/nested.yaml"],
     "plan.pipeline.splits=[['a'], {'b': 1}]: allowed: a list of str values"),
    ("a list in the splits of a compared file", ["compare", "{tmp}/ok.yaml", "{tmp}/nested.yaml"],
     "plan.pipeline.splits=[['a'], {'b': 1}]: allowed: a list of str values"),
    ("a list in the splits of an evaluate override", ["evaluate", "{tmp}/ok.yaml",
                                                      "plan.pipeline.splits=[[a]]"],
     "plan.pipeline.splits=[['a']]: allowed: a list of str values"),
    ("a list in the objectives of an experiment", ["--config-dir", "{tmp}/exp", "+experiment=obj"],
     "search.objectives=[['throughput']]: allowed: a list of str values"),
    # An empty --storage or --results-dir read as the default storage.
    ("empty storage", ["studies", "--storage", ""], "--storage='': empty; allowed: a journal"),
    ("empty storage of trials", ["trials", "s", "--results-dir", "{study}", "--storage", ""],
     "--storage='': empty; allowed:"),
    ("empty results dir", ["studies", "--results-dir", ""], "--results-dir='': empty; allowed:"),
    # `--fit ''` read as every constant.
    ("calibrate fit of no name", ["calibrate", "--fit", ""],
     "--fit='': names no constant; allowed: comma-separated names of matmul_efficiency"),
    ("calibrate fit of commas", ["calibrate", "--fit", ",,"], "--fit=',,': names no constant"),
    ("calibrate check with an empty fit", ["calibrate", "--check", "--fit", ""],
     "--fit=: a fit option; --check refits nothing"),
    # An in-memory SQLite database: a study lost at exit (one per worker), listed empty.
    ("sqlite without a file", ["model=mnist_cnn", "study.n_trials=1",
                               "study.storage=sqlite:///"], f"study.storage='sqlite:///': "
                                                            f"{_IN_MEMORY}"),
    ("sqlite in memory", ["model=mnist_cnn", "study.n_trials=1",
                          "study.storage=sqlite:///:memory:"], _IN_MEMORY),
    ("sqlite with no path", ["model=mnist_cnn", "study.n_trials=1", "study.storage=sqlite://"],
     _IN_MEMORY),
    ("studies of sqlite in memory", ["studies", "--storage", "sqlite:///:memory:"],
     f"--storage='sqlite:///:memory:': {_IN_MEMORY}"),
    # An infinite bound kept no row (nan was refused already).
    ("where above inf", ["trials", "s", "--results-dir", "{study}", "--where", "samples/s>inf"],
     "--where='samples/s>inf': inf is not a finite number; allowed: a finite number"),
    ("where below -1e999", ["trials", "s", "--results-dir", "{study}", "--where",
                            "throughput<-1e999"], "-1e999 is not a finite number"),
    # A proportion just above 0 passed (0, 1]: the simulator split a matmul into more passes
    # than a float holds (a traceback), or printed a peak of 10**305 MB.
    ("amp of 5e-324", ["plan.available_memory_proportion=5e-324"],
     "plan.available_memory_proportion=5e-324: must be in [0.001, 1]"),
    ("amp per IPU of 1e-300", ["plan.available_memory_proportion_per_ipu=[1e-300]"],
     "plan.available_memory_proportion_per_ipu=[1e-300]: each value must be in [0.001, 1]"),
    ("amp of 1e-320 in a file", ["evaluate", "{tmp}/amp_tiny.yaml"],
     "plan.available_memory_proportion=1e-320: must be in [0.001, 1]"),
    ("amp of 1e-320 in a compared file", ["compare", "{tmp}/ok.yaml", "{tmp}/amp_tiny.yaml"],
     "plan.available_memory_proportion=1e-320: must be in [0.001, 1]"),
    ("matmul_proportion of 1e-320", ["model=gpt2", "system=pod4",
                                     "plan.from_ipu_config={tmp}/amp_tiny.json"],
     "matmul_proportion (sets plan.available_memory_proportion_per_ipu=[1e-320, 0.2]: each "
     "value must be in [0.001, 1])"),
    # Values of another shape than their key takes: OmegaConf's words ("Cannot merge DictConfig
    # with ListConfig", "field ... is not Optional", "a AnyNode", "Merge error: list is not a
    # subclass of PipelineConfig") named neither the key nor the value, or no key at all.
    ("null for an integer", ["plan.gradient_accumulation=null"],
     "plan.gradient_accumulation=null: allowed: an integer"),
    ("null for a switch", ["plan.eight_bit_io=null"], "plan.eight_bit_io=null: allowed: true or"),
    ("null for the per-IPU proportions", ["plan.available_memory_proportion_per_ipu=null"],
     "plan.available_memory_proportion_per_ipu=null: allowed: a list of float values"),
    ("null in the per-IPU proportions", ["plan.available_memory_proportion_per_ipu=[0.2,null]"],
     "plan.available_memory_proportion_per_ipu=[0.2, None]: allowed: a list of float values"),
    ("a mapping for a list", ["plan.pipeline.splits={a: 1}"],
     "plan.pipeline.splits={'a': 1}: allowed: a list of str values"),
    ("a list for a section", ["plan.pipeline=[a]"],
     "plan.pipeline=['a']: allowed: a mapping of its keys (splits, schedule)"),
    ("a number for a section", ["plan.pipeline=3"], "plan.pipeline=3: allowed: a mapping"),
    ("a list for a free mapping", ["model.kwargs=[1]"],
     "model.kwargs=[1]: allowed: a mapping (KEY: VALUE)"),
    ("null in a sweep", ["-m", "plan.gradient_accumulation=1,null"],
     "plan.gradient_accumulation=null: allowed: an integer"),
    ("a number for the per-IPU proportions in a file", ["evaluate", "{tmp}/amp_scalar.yaml"],
     "plan.available_memory_proportion_per_ipu=0.3: allowed: a list of float values"),
    ("null in the per-IPU proportions of a compared file",
     ["compare", "{tmp}/ok.yaml", "{tmp}/amp_null.yaml"],
     "plan.available_memory_proportion_per_ipu=[0.3, None]: allowed: a list of float values"),
    ("a list for a section in a file", ["evaluate", "{tmp}/pipeline_list.yaml"],
     "plan.pipeline=['a']: allowed: a mapping of its keys (splits, schedule)"),
    ("null in an experiment", ["--config-dir", "{tmp}/exp", "+experiment=amp_null"],
     "experiment/amp_null: plan.available_memory_proportion_per_ipu=null: allowed: a list"),
    ("a mapping for a list in an experiment", ["--config-dir", "{tmp}/exp",
                                               "+experiment=splits_map"],
     "experiment/splits_map: plan.pipeline.splits={'a': 1}: allowed: a list of str values"),
    ("a number for a list in a model file", ["--config-dir", "{tmp}/exp", "model=shape"],
     "model/shape: model.input_shape=3: allowed: a list of int values"),
    # An empty path read as the current folder (`Path("")` is "."), named as '.': or as the
    # option left out (calibrate --output '' fitted, then wrote nothing).
    ("evaluate an empty path", ["evaluate", ""],
     "ipu-tune evaluate: argument config: '': empty; allowed: a path of a file"),
    ("compare an empty path", ["compare", "{tmp}/ok.yaml", " "],
     "ipu-tune compare: argument B.yaml: ' ': empty; allowed: a path of a file"),
    ("evaluate with empty constants", ["evaluate", "{tmp}/ok.yaml", "--constants", ""],
     "argument --constants: '': empty"),
    ("export to an empty path", ["export", "s", "--output", "", "--results-dir", "{study}"],
     "ipu-tune export: argument --output: '': empty"),
    ("calibrate to an empty path", ["calibrate", "--max-evals", "10", "--output", ""],
     "ipu-tune calibrate: argument --output: '': empty"),
    ("calibrate an empty path", ["calibrate", ""], "argument files: '': empty"),
    ("config dir empty", ["--config-dir", "", "model=mnist_cnn"],
     "--config-dir='': empty; allowed: a path"),
    # A journal URL naming no file: Path("/").with_name raised a ValueError (a traceback).
    ("journal URL of no file", ["model=mnist_cnn", "study.storage=journal:///"],
     "study.storage='journal:///': empty; allowed: a path"),
    ("studies of a journal URL of no file", ["studies", "--storage", "journal:///"],
     "--storage='journal:///': empty; allowed: a path"),
    # Places that cannot hold the run's files, refused before the first trial (before, after
    # the whole study ran, or exit 1 as if the disk were at fault).
    # The kernel's files: refused by where they are, whatever errno a write there would give.
    ("results dir under /proc", ["model=mnist_cnn", "study.n_trials=1",
                                 "results_dir=/proc/self/results"],
     "results_dir='/proc/self/results': its journal '/proc/self/results/ipu_tune.journal' would "
     "be in the kernel's files; allowed: a journal file on a disk (not under /proc or /sys)"),
    ("results dir /proc", ["model=mnist_cnn", "study.n_trials=1", "results_dir=/proc"],
     "results_dir='/proc': its journal '/proc/ipu_tune.journal' would be in the kernel's"),
    ("results dir under /sys", ["model=mnist_cnn", "study.n_trials=1", "results_dir=/sys/kernel"],
     "results_dir='/sys/kernel': its journal"),
    ("sqlite under /proc", ["model=mnist_cnn", "study.n_trials=1",
                            "study.storage=sqlite:////proc/x.db"],
     "study.storage='sqlite:////proc/x.db': its SQLite database '/proc/x.db' would be in the "
     "kernel's files"),
    ("a file where the export folder belongs", ["model=mnist_cnn", "study.n_trials=1",
                                                "results_dir={tmp}/r_ff"],
     "export path='{tmp}/r_ff/mnist_cnn-mk2x2-throughput': exists and is not a folder"),
    ("a folder where the results table belongs", ["model=mnist_cnn", "study.n_trials=1",
                                                  "results_dir={tmp}/r_db"],
     "results_dir='{tmp}/r_db': its results table '{tmp}/r_db/results.db' exists and is not a "
     "regular file (a folder, FIFO or device); allowed: a results table file or a new name"),
    ("a results table path over SQLite's limit", ["model=mnist_cnn", "study.n_trials=1",
                                                  "results_dir={tmp}/" + "d" * 250 + "/"
                                                  + "e" * 250],
     "/results.db' has a path of"),
]
