"""Bad input: one clear line naming the key and what is allowed, exit 2, no traceback, and
nothing written. Table-driven over the command line of the tuner and of every subcommand
(evaluate, studies, report, export, profile, calibrate); hostile inputs included (escaping
names, code named in files, huge numbers, YAML bombs, binary files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main
from tests.cli._bad_files import write_fixtures
from tests.cli._probe_cases import PROBE_CASES
from tests.cli._probe_cases_b import PROBE_B_CASES
from tests.conftest import run_cli

# (id, arguments, text the one-line message must contain). `{tmp}` is the test's directory.
CASES: list[tuple[str, list[str], str]] = [
    ("unknown model option", ["model=nope"], "model=nope"),
    ("unknown system option", ["system=nope"], "system=nope"),
    ("unknown search option", ["search=nope"], "search=nope"),
    ("unknown sampler option", ["sampler=nope"], "sampler=nope"),
    ("unknown experiment", ["+experiment=nope"], "experiment=nope"),
    # With --config-dir Hydra composes (not the preflight): its errors are one line too.
    ("config dir: unknown experiment", ["--config-dir", "{tmp}/confdir", "+experiment=nope",
     "study.storage=postgresql://u:SECRETPW@h/db"], "experiment/nope"),
    ("config dir: unknown model", ["--config-dir", "{tmp}/confdir", "model=nope"], "model/nope"),
    ("config dir: unknown key", ["--config-dir", "{tmp}/confdir", "foo.bar=1"], "foo"),
    # Flags that shape --cfg's print: alone, Hydra ignores them and runs the whole study.
    ("--package without --cfg", ["--package=model", "study.n_trials=1"],
     "--package: only with --cfg"),
    ("-p without --cfg", ["-p", "model"], "-p: only with --cfg"),
    ("--resolve without --cfg", ["--resolve"], "--resolve: only with --cfg"),
    # Hydra takes --resolve only beside --cfg or --help: beside --info it raised a ValueError.
    ("--resolve beside --info", ["--info", "--resolve"], "--resolve: only with --cfg"),
    ("wrong type", ["plan.gradient_accumulation=abc"], "plan.gradient_accumulation"),
    ("unknown key", ["plan.foo=1"], "foo"),
    # `+`/`++` add keys to Hydra's composition, not to the schema.
    ("add an unknown top-level key", ["+foo=1"], "foo: unknown key; allowed in the config: model"),
    ("add an unknown plan key", ["+plan.foo=1"], "plan.foo: unknown key; allowed in plan:"),
    ("force-add an unknown plan key", ["++plan.foo=1"], "plan.foo: unknown key"),
    ("add an unknown key in a sweep", ["-m", "+plan.foo=1", "system.num_ipus=2,4"],
     "plan.foo: unknown key"),
    # Checked before the first run: the second would be refused after the first had run.
    ("a sweep's runs in one named study", ["-m", "study.name=fixed", "system.num_ipus=2,4"],
     "study.name='fixed': the sweep's runs would share one study but are different problems"),
    ("micro-batch zero", ["workload.micro_batch_size=0"], "workload.micro_batch_size"),
    ("io_tiles odd", ["plan.io_tiles=33"], "plan.io_tiles"),
    ("io_tiles below 32", ["plan.io_tiles=30"], "plan.io_tiles"),
    ("io_tiles above 192", ["plan.io_tiles=194"], "plan.io_tiles"),
    ("num_ipus not a power of two", ["system.num_ipus=3"], "system.num_ipus"),
    ("precision", ["plan.precision=8.8"], "plan.precision"),
    ("schedule", ["plan.pipeline.schedule=zigzag"], "plan.pipeline.schedule"),
    ("recompute", ["plan.recompute=always"], "plan.recompute"),
    ("amp above 1", ["plan.available_memory_proportion=1.5"], "available_memory_proportion"),
    ("amp per IPU above 1", ["plan.available_memory_proportion_per_ipu=[0.2,1.5]"],
     "plan.available_memory_proportion_per_ipu=[0.2, 1.5]: each value must be in [0.001, 1]"),
    ("amp per IPU not a number", ["plan.available_memory_proportion_per_ipu=[0.2,abc]"],
     "plan.available_memory_proportion_per_ipu"),
    # OmegaConf's merge takes a container as an item of a typed list.
    ("a list in a list of names", ["plan.pipeline.splits=[[layer3.8]]"],
     "plan.pipeline.splits=[['layer3.8']]: allowed: a list of str values"),
    ("a list in a list of numbers", ["model.input_shape=[[3],64,64]"],
     "model.input_shape=[[3], 64, 64]: allowed: a list of int values"),
    ("a mapping in a list of numbers", ["plan.available_memory_proportion_per_ipu=[{a: 1}]"],
     "plan.available_memory_proportion_per_ipu=[{'a': 1}]: allowed: a list of float values"),
    ("a list in the objectives", ["search.objectives=[[throughput]]"],
     "search.objectives=[['throughput']]: allowed: a list of str values"),
    ("amp per IPU for other stages", ["plan.available_memory_proportion_per_ipu=[0.2,0.3,0.4]"],
     "plan.available_memory_proportion_per_ipu=[0.2, 0.3, 0.4]: one value per IPU of a replica"
     " (1, the pipeline stages)"),
    ("prefetch zero", ["plan.prefetch_depth=0"], "plan.prefetch_depth"),
    ("optimizer", ["workload.optimizer=adagrad"], "workload.optimizer"),
    ("mode", ["workload.mode=serve"], "workload.mode"),
    ("ipu kind", ["system.ipu=mk9"], "system.ipu"),
    ("split not in model", ["plan.pipeline.splits=[nope]"], "plan.pipeline.splits"),
    ("splits out of order", ["system.num_ipus=4", "plan.pipeline.splits=[layer4.0,layer3.8]"],
     "plan.pipeline.splits"),
    ("more splits than IPUs", ["plan.pipeline.splits=[layer2.0,layer3.0,layer4.0]"],
     "system.num_ipus"),
    ("stages do not divide IPUs", ["system.num_ipus=4", "plan.pipeline.splits=[layer2.0,layer3.0]"],
     "system.num_ipus"),
    ("rts without replicas", ["plan.replicated_tensor_sharding=true",
                              "plan.replication_factor=1"], "plan.replicated_tensor_sharding"),
    ("n_trials zero", ["study.n_trials=0"], "study.n_trials"),
    ("packs of images", ["model.dataset.sequences_per_pack=2"], "model.dataset.sequences_per_pack"),
    ("less than a sequence per pack", ["model=bert_base", "model.dataset.sequences_per_pack=0.5"],
     "model.dataset.sequences_per_pack"),
    ("more sequences per pack than tokens", ["model=bert_base", "model.sequence_length=64",
     "model.dataset.sequences_per_pack=65"], "at most the sequence length (64)"),
    ("masked positions not a count", ["model=bert_base", "model.kwargs.masked_positions=abc"],
     "model.kwargs.masked_positions='abc': an integer from 1 to the sequence length 128"),
    ("masked positions zero", ["model=bert_base", "model.kwargs.masked_positions=0"],
     "model.kwargs.masked_positions=0"),
    ("masked positions over the sequence", ["model=bert_base", "model.sequence_length=64",
     "model.kwargs.masked_positions=65"], "model.kwargs.masked_positions=65"),
    ("unknown zoo name", ["model.name=nope"], "nope"),
    ("target does not import", ["model._target_=no_such_module.make"], "no_such_module"),
    ("empty search space", ["search.space={tmp}/empty.yaml"], "empty.yaml"),
    ("malformed search space", ["search.space={tmp}/malformed.yaml"], "malformed.yaml"),
    ("low above high", ["search.space={tmp}/low_high.yaml"], "low_high.yaml"),
    ("results dir not writable", ["results_dir={tmp}/a_file/sub"], "results_dir"),
    ("corrupted database", ["study.storage=sqlite:///{tmp}/corrupt.db"], "corrupt.db"),
    ("sweep with one bad value", ["-m", "plan.io_tiles=0,33"], "plan.io_tiles"),
    ("several values without -m", ["plan.gradient_accumulation=1,2"],
     "several values are a sweep; allowed: run the sweep with -m"),
    ("glob sweep", ["-m", "system=glob(pod*)"], "Hydra's basic sweeper cannot list these values"),
    ("interval sweep", ["-m", "plan.available_memory_proportion=interval(0.1,0.5)"],
     "Hydra's basic sweeper cannot list these values"),
    # Hydra's sweeper failed on it with a traceback of OmegaConf's (`Set[str]`).
    ("range among a sweep's values", ["-m", "workload.micro_batch_size=range(1,3),8"],
     "a sweep among a sweep's values; allowed with -m: one form per key"),
    ("deleting a schema key", ["~plan.gradient_accumulation"],
     "~plan.gradient_accumulation: deletion is not allowed"),
    ("experiment without +", ["experiment=seed_mnist"], "allowed: +experiment=NAME"),
    # Hydra saves a sweep's overrides and config in multirun.yaml, unredacted.
    ("sweep with a password", ["-m", "study.storage=postgresql://u:SECRETPW@127.0.0.1:1/x",
                               "system.num_ipus=2,4"], "a password in a sweep (-m)"),
    ("sweep with a password in a config dir", ["-m", "--config-dir", "{tmp}/pwdir",
                                               "+experiment=pw", "system.num_ipus=2,4"],
     "study.storage='postgresql://u:***@127.0.0.1:1/x': a password in a sweep (-m)"),
    ("sweep with an escaped password in a config dir",
     ["-m", "--config-dir", "{tmp}/pwdir_escaped", "+experiment=pw", "system.num_ipus=2,4"],
     "study.storage='postgresql://u:***@127.0.0.1:1/x': a password in a sweep (-m)"),
    ("sweep with a password in a config dir's defaults list",
     ["-m", "--config-dir", "{tmp}/pwdir_nested", "+experiment=pw", "system.num_ipus=2,4"],
     "study.storage='postgresql://u:***@127.0.0.1:1/x': a password in a sweep (-m)"),
    # Names that would escape results_dir or break the exports.
    ("study name dotdot path", ["study.name=../../x"], "study.name='../../x'"),
    ("study name absolute", ["study.name=/abs/path"], "study.name='/abs/path'"),
    ("study name dotdot", ["study.name=.."], "study.name='..'"),
    ("study name dot", ["study.name=."], "study.name='.'"),
    ("study name backslash", ["study.name=a\\b"], "study.name="),
    ("study name 300 chars", ["study.name=" + "x" * 300], "study.name='xxxxxxxx"),
    ("study name empty", ["study.name=''"], "study.name=''"),
    ("search name dotdot", ["search.name=../.."], "search.name='../..'"),
    # Numbers beyond what the stores and the hardware hold.
    ("GA 10**20", ["plan.gradient_accumulation=100000000000000000000"],
     "plan.gradient_accumulation=100000000000000000000"),
    ("micro-batch 10**12", ["workload.micro_batch_size=1000000000000"],
     "workload.micro_batch_size=1000000000000"),
    ("num_ipus 2**40", ["system.num_ipus=1099511627776"], "system.num_ipus=1099511627776"),
    ("num_ipus 2048", ["system.num_ipus=2048"], "system.num_ipus=2048"),
    ("replicas 2048", ["plan.replication_factor=2048"], "plan.replication_factor=2048"),
    ("DI 10**9", ["plan.device_iterations=1000000000"], "plan.device_iterations=1000000000"),
    ("n_trials 10**7", ["study.n_trials=10000000"], "study.n_trials=10000000"),
    ("workers 10**5", ["study.workers=100000"], "study.workers=100000"),
    ("workers zero", ["study.workers=0"], "study.workers=0"),
    ("prefetch 10**5", ["plan.prefetch_depth=100000"], "plan.prefetch_depth=100000"),
    ("loader workers 10**5", ["plan.dataloader_workers=100000"],
     "plan.dataloader_workers=100000"),
    ("input dim 10**7", ["model.input_shape=[3,10000000,64]"], "model.input_shape=[3, 10000000"),
    ("num_classes 10**11", ["model.num_classes=100000000000"], "model.num_classes=100000000000"),
    ("sequence 10**7", ["model=bert_base", "model.sequence_length=10000000"],
     "model.sequence_length=10000000"),
    ("sample bytes 10**15", ["model.dataset.sample_bytes=1000000000000000"],
     "model.dataset.sample_bytes=1000000000000000"),
    ("sampler seed negative", ["sampler.seed=-1"], "sampler.seed=-1"),
    ("global batch 2**50", ["search.global_batch_size=1125899906842624"],
     "search.global_batch_size=1125899906842624"),
    # Code the tuner must never call.
    ("target os.system", ["model._target_=os.system", "+model.kwargs.command=true"],
     "model._target_='os.system'"),
    ("target getoutput", ["model._target_=subprocess.getoutput", "+model.kwargs.cmd=true"],
     "model._target_='subprocess.getoutput'"),
    ("target popen", ["model._target_=os.popen", "+model.kwargs.cmd=true"],
     "model._target_='os.popen'"),
    ("target eval", ["model._target_=builtins.eval", "+model.kwargs.source=1"],
     "model._target_='builtins.eval'"),
    ("trust flag value", ["trust_remote_code=maybe"], "trust_remote_code='maybe'"),
    # Storage.
    ("journal in a missing folder", ["study.storage=journal:///{tmp}/nope/x.journal"],
     "nope/x.journal"),
    # Code: only model._target_ names code; Hydra's side doors are refused before anything runs.
    ("hydra launcher target", ["hydra.launcher._target_=os.system"], "hydra.launcher._target_"),
    ("hydra sweeper plugin", ["hydra/sweeper=optuna"], "hydra/sweeper"),
    ("hydra env_set", ["+hydra.job.env_set.LD_PRELOAD={tmp}/x.so"], "hydra.job.env_set"),
    ("hydra searchpath", ["hydra.searchpath=[pkg://antigravity]"], "hydra.searchpath"),
    ("hydra logging factory", ["+hydra.job_logging.handlers.h.()=os.system"],
     "hydra.job_logging"),
    # Hydra's own files stay in results_dir: keys that move them, log files, are refused.
    ("hydra run dir", ["hydra.run.dir={tmp}/out"], "hydra.run.dir="),
    ("hydra output subdir", ["+hydra.output_subdir={tmp}/out"], "hydra.output_subdir="),
    ("hydra sweep dir", ["-m", "hydra.sweep.dir={tmp}/out", "system.num_ipus=2,4"],
     "hydra.sweep.dir="),
    ("hydra chdir", ["hydra.job.chdir=true"], "hydra.job.chdir="),
    ("hydra log file", ["hydra/job_logging=default"], "hydra/job_logging='default'"),
    ("results_dir empty", ["results_dir="], "results_dir='': empty"),
    # Hydra's flags read as Hydra reads them; a bad one is one line, not argparse's usage.
    ("hydra flag with a bad value", ["--info", "X"], "--info='X': allowed: all, config"),
    ("hydra flag without its value", ["--cfg"], "--cfg: expects a value; allowed: --cfg job"),
    ("hydra flag without its value after an override", ["model=mnist_cnn", "--cfg", "job", "-p"],
     "-p: expects a value; allowed: -p VALUE"),
    ("two of Hydra's modes", ["model=mnist_cnn", "--info", "-m"],
     "--multirun --info: Hydra takes only one of them"),
    ("unknown flag", ["--bogus"], "--bogus: unknown flag"),
    ("shell completion alone", ["--shell-completion"], "--shell-completion alone: allowed"),
    ("shell completion of a key", ["--shell-completion", "query=model"],
     "--shell-completion 'query=model': allowed: one of install=SHELL"),
    ("hydra rerun pickle", ["--experimental-rerun", "{tmp}/config.pickle"], "unpickles"),
    ("target outside model", ["+plan._target_=os.system"], "only model._target_"),
    ("target yaml.safe_load", ["model._target_=yaml.safe_load", "+model.kwargs.stream=x"],
     "not a torch.nn.Module"),
    ("target optuna.delete_study", ["model._target_=optuna.delete_study",
                                    "+model.kwargs.study_name=x", "+model.kwargs.storage=x"],
     "returns NoneType, not a torch.nn.Module"),
    ("target pip rmtree", ["model._target_=pip._internal.utils.misc.rmtree",
                           "+model.kwargs.dir={tmp}/a_dir.csv"], "not a torch.nn.Module"),
    # Credentials: a password with /, @ or ! never printed, in a URL that parses or not.
    ("password in a lexer error", ["study.storage=postgresql://u:SECRET!x@@"], "study.storage="),
    ("password in a URL without ://", ["study.storage=postgresql//u:SECRET@h/x"],
     "not a storage URL"),
    # Data loss: what is not an Optuna journal is refused unopened.
    ("sqlite file as a journal", ["study.storage={tmp}/sqlite.journal"], "not an Optuna journal"),
    ("log file as a journal", ["study.storage={tmp}/app.log"], "not an Optuna journal"),
    ("symlinked text as a journal", ["study.storage={tmp}/link.journal"],
     "not an Optuna journal"),
    ("fifo as a journal", ["study.storage={tmp}/fifo.journal"], "not a regular file"),
    # Claims and locks: the wrong thing where a claims file belongs is one line, no hang.
    ("folder as the claims file", ["study.storage=sqlite:///{tmp}/cdir.db"], "cdir.db.claims"),
    ("fifo as the claims file", ["study.storage=sqlite:///{tmp}/cfifo.db"], "cfifo.db.claims"),
    ("device as the claims file", ["study.storage=sqlite:///{tmp}/cdev.db"], "cdev.db.claims"),
    ("sqlite on a device", ["study.storage=sqlite:////dev/zero"], "not a regular file"),
    ("sqlite on a folder", ["study.storage=sqlite:///{tmp}/confdir"], "not a regular file"),
    ("sqlite in a missing folder", ["study.storage=sqlite:///{tmp}/nope/dir/x.db"],
     "does not exist"),
    # Numbers: finite, of their type, rates and limits positive; paths without control chars.
    ("amp nan", ["plan.available_memory_proportion=nan"], "plan.available_memory_proportion"),
    ("network rate zero", ["system.host.network_bytes_per_s=0"],
     "system.host.network_bytes_per_s"),
    ("network rate -inf", ["system.host.network_bytes_per_s=-inf"],
     "system.host.network_bytes_per_s"),
    ("timeout zero", ["study.timeout_s=0"], "study.timeout_s"),
    ("floor -inf", ["search=memory", "search.throughput_floor=-inf"], "search.throughput_floor"),
    ("preprocess -inf", ["model.dataset.preprocess_s_per_sample=-inf"],
     "model.dataset.preprocess_s_per_sample"),
    ("workers 1.5", ["study.workers=1.5"], "study.workers"),
    ("results_dir with a tab", ["results_dir='a\tb'"], "results_dir="),
    ("results_dir with a carriage return", ["results_dir='a\rb'"], "results_dir="),
    # Hostile space files.
    ("binary search space", ["search.space={tmp}/binary.yaml"], "binary.yaml"),
    ("deep search space", ["search.space={tmp}/deep.yaml"], "nested deeper than"),
    ("billion laughs space", ["search.space={tmp}/bomb.yaml"], "aliases"),
    ("space key twice", ["search.space={tmp}/dup_space.yaml"], "key 'knobs' given twice"),
    # A starting plan the system cannot hold, not set on the command line: refused before
    # any storage exists (no empty study left to list).
    ("ipu_config.json replicas above the IPUs", ["model=gpt2", "system=pod4",
     "plan.from_ipu_config={tmp}/rf8.json"],
     "plan.from_ipu_config='{tmp}/rf8.json': replication_factor (sets "
     "plan.replication_factor=8: must be at most system.num_ipus=4"),
    ("ipu_config.json proportion above 1", ["model=gpt2", "system=pod4",
     "plan.from_ipu_config={tmp}/amp_list.json"],
     "plan.from_ipu_config='{tmp}/amp_list.json': matmul_proportion=[0.05, 1.5]: every "
     "element must be in 0..1"),
    ("experiment replicas above the IPUs", ["--config-dir", "{tmp}/exp", "+experiment=rf8",
     "system=pod4"], "plan.replication_factor=8: must be at most system.num_ipus=4"),
    ("ipu_config.json key twice", ["model=gpt2", "plan.from_ipu_config={tmp}/dup.json"],
     "key 'layers_per_ipu' given twice"),
    ("config.json key twice", ["model=hf", "model.hf.config_file={tmp}/dup.json"],
     "key 'layers_per_ipu' given twice"),
    ("huge search space", ["search.space={tmp}/big.yaml"], "larger than"),
    # Hydra's grammar: the override named with how to quote it, its password hidden.
    ("URL with an unquoted ?password=", ["study.storage=postgresql://u@h/db?password=SECRET"],
     "'study.storage=postgresql://u@h/db?password=***': Hydra's override grammar cannot read"),
    ("list never closed", ["workload.micro_batch_size=[1,"],
     "'workload.micro_batch_size=[1,': Hydra's override grammar cannot read"),
    # Beyond what Python's int() and the recursive readers take: one line, not a traceback.
    ("GA of 4301 digits", ["plan.gradient_accumulation=" + "1" * 4301], "over 4300 digits"),
    ("space file int of 4301 digits", ["search.space={tmp}/huge_int.yaml"], "4300 digits"),
    ("kwarg 200 levels deep", ["+model.kwargs.foo=" + "[" * 200 + "]" * 200],
     "+model.kwargs.foo='[[[["),
    ("hf config 200 levels deep", ["model=hf", "model.hf.config={n_layer: " + "[" * 200
                                   + "]" * 200 + "}"], "nested deeper than 50 levels"),
    ("ipu_config.json 5000 objects deep", ["model=gpt2", "plan.from_ipu_config="
                                          "{tmp}/deep_objects.json"], "nested deeper than 50"),
    ("ipu_config.json 100000 lists deep", ["model=gpt2", "plan.from_ipu_config="
                                          "{tmp}/deep_lists.json"], "nested deeper than 50"),
    ("config.json 5000 objects deep", ["model=hf", "model.hf.config_file={tmp}/deep_objects.json"],
     "nested deeper than 50"),
    # Devices and FIFOs where a JSON file belongs: one line, no endless read, no wait.
    ("config.json a device", ["model=hf", "model.hf.config_file=/dev/zero"],
     "model.hf.config_file='/dev/zero': not a regular file"),
    ("config.json a FIFO", ["model=hf", "model.hf.config_file={tmp}/fifo.journal"],
     "not a regular file"),
    ("ipu_config.json a device", ["model=gpt2", "plan.from_ipu_config=/dev/zero"],
     "plan.from_ipu_config='/dev/zero': not a regular file"),
    ("ipu_config.json a FIFO", ["model=gpt2", "plan.from_ipu_config={tmp}/fifo.journal"],
     "not a regular file"),
    # A Hub model with its own code: the code beside its config.json is never imported.
    ("config.json of a model with its own code", ["model=hf", "model.hf.config_file={tmp}/own"],
     "model.hf.config_file='{tmp}/own': a config.json whose model_type is a Transformers model"),
    # Names from a fixed set: a typo is refused, not run as some other dataset.
    ("dataset name typo", ["model.dataset.name=imagenett"],
     "model.dataset.name='imagenett': allowed: cifar10, imagenet, mnist"),
    ("dataset name empty", ["model.dataset.name=''"], "model.dataset.name='': allowed:"),
    ("dataset name typo in an experiment", ["--config-dir", "{tmp}/exp", "+experiment=imagenett"],
     "model.dataset.name='imagenett': allowed:"),
    # An empty optional string is not null: it would start a study of its own doing nothing.
    ("hf task empty", ["model=hf", "model.hf.model_type=gpt2", "model.hf.task=''"],
     "model.hf.task='': empty; allowed: a head"),
    ("ipu_config.json path empty", ["model=gpt2", "plan.from_ipu_config=''"],
     "plan.from_ipu_config='': empty; allowed:"),
    ("constants path empty", ["simulator.constants=''"], "simulator.constants='': empty"),
    ("storage empty", ["study.storage=''"], "study.storage='': empty; allowed: a journal file"),
    # Paths the file system cannot name: one line, not the first stat's traceback.
    ("results_dir a URL", ["results_dir=postgresql://u:SECRETPW@h/db"],
     "results_dir='postgresql://u:***@h/db': a URL; allowed: a folder"),
    ("results_dir name of 300 bytes", ["results_dir=" + "d" * 300], "a path too long"),
    ("journal folder of 300 bytes", ["study.storage=journal:///{tmp}/" + "d" * 300 + "/x.journal"],
     "study.storage='journal:///"),
    ("ipu_config.json path of 5000 bytes", ["model=gpt2", "plan.from_ipu_config=" + "d" * 5000],
     "plan.from_ipu_config='dddd"),
    ("config dir of 5000 bytes", ["--config-dir", "d" * 5000, "+experiment=x"],
     "--config-dir='dddd"),
    ("config dir a device", ["--config-dir", "/dev/null", "+experiment=x"],
     "--config-dir='/dev/null': not a folder; allowed: a folder of config groups"),
    # Numbers far beyond any machine.
    ("host cores 10**8", ["system.host.cpu_cores=100000000"],
     "system.host.cpu_cores=100000000: must be <= 4096"),
    ("network 1e300 bytes/s", ["system.host.network_bytes_per_s=1e300"],
     "system.host.network_bytes_per_s=1e+300: must be <= 1e+13"),
    ("network 1e-300 bytes/s", ["system.host.network_bytes_per_s=1e-300"],
     "system.host.network_bytes_per_s=1e-300: must be >= 1e+06"),
    ("preprocess 1e300 s", ["model.dataset.preprocess_s_per_sample=1e300"],
     "model.dataset.preprocess_s_per_sample=1e+300: must be <= 3600"),
    ("instances 2**40", ["plan.host_instances=1099511627776"],
     "plan.host_instances=1099511627776: must be <= 1024"),
    # The sampler: checked before the storage is made (the snapshot: nothing written).
    ("sampler name typo", ["sampler.name=tpee"], "sampler.name='tpee': allowed: tpe"),
    ("sampler argument not a count", ["sampler.params.n_startup_trials=abc"],
     "sampler.params.n_startup_trials='abc': allowed: an integer in 0..1,000,000"),
    ("sampler without candidates", ["sampler.params.n_ei_candidates=0"],
     "sampler.params.n_ei_candidates=0: allowed: an integer in 1..10,000"),
    ("sampler argument not a bool", ["sampler.params.group=2"],
     "sampler.params.group=2: allowed: true or false"),
    ("sampler argument the preset lacks", ["sampler=nsga2", "sampler.params.crossover_prob=0.5"],
     "allowed: +sampler.params.crossover_prob=VALUE adds it"),
    # Wrong types: the key, the value and the type it takes.
    ("list where a string goes", ["plan.precision=[16.16]"],
     "plan.precision=[16.16]: allowed: a string"),
    ("word where a bool goes", ["plan.offload_optimizer_state=maybe"],
     "plan.offload_optimizer_state='maybe': allowed: true or false"),
    # OmegaConf reads these as true: a switch takes true or false only.
    # model.hf describes a Transformers model: beside a model of another kind it was ignored.
    ("Transformers type beside a zoo model", ["model=mnist_cnn", "model.hf.model_type=gpt2"],
     "model.hf.model_type='gpt2': only for a Transformers model (model=hf), not with "
     "model.name='mnist_cnn'"),
    ("second type for a Transformers zoo name", ["model=gpt2", "model.hf.model_type=llama"],
     "model.hf.model_type='llama': not with model.name='gpt2'"),
    ("count for a switch in an experiment", ["--config-dir", "{tmp}/switch",
                                             "+experiment=count"],
     "plan.eight_bit_io=2: allowed: true or false"),
    ("count where a bool goes", ["plan.eight_bit_io=2"],
     "plan.eight_bit_io=2: allowed: true or false"),
    ("yes where a bool goes", ["study.progress_bar=yes"],
     "study.progress_bar='yes': allowed: true or false"),
    ("count in a sweep of a bool", ["-m", "plan.async_dataloader=true,1"],
     "plan.async_dataloader=1: allowed: true or false"),
    ("fraction where an integer goes", ["workload.micro_batch_size=1.5"],
     "workload.micro_batch_size=1.5: allowed: an integer"),
    # Echoed as given, not as OmegaConf's '1000.0' (a string, to a reader).
    ("exponent where an integer goes", ["study.n_trials=1e3"],
     "study.n_trials=1e3: allowed: an integer"),
    ("switch where an integer goes", ["study.n_trials=TRUE"],
     "study.n_trials=TRUE: allowed: an integer"),
    ("list where an integer goes", ["study.n_trials=[a, 1.5, null]"],
     "study.n_trials=[a, 1.5, null]: allowed: an integer"),
    ("exponent in a sweep where an integer goes", ["-m", "study.n_trials=2,1e3"],
     "study.n_trials=1e3: allowed: an integer"),
    # Of a key given twice, the value OmegaConf refused (the first), not the last.
    ("bad value of a key given twice", ["study.n_trials=1e3", "study.n_trials=5"],
     "study.n_trials=1e3: allowed: an integer"),
    ("string where a list goes", ["plan.pipeline.splits=layer3.8"],
     "plan.pipeline.splits='layer3.8': allowed: a list of str values"),
    ("wrong type in an experiment", ["--config-dir", "{tmp}/exp", "+experiment=mbs"],
     "experiment/mbs: workload.micro_batch_size='1000.0': allowed: an integer"),
    # Long values: cut in their middle, the message stays one short line.
    ("model name of 5000 characters", ["model.name=" + "r" * 5000], "characters)...rrrr"),
    ("ipu_config.json list of 50000 layers", ["model=gpt2",
                                              "plan.from_ipu_config={tmp}/long_list.json"],
     "layers_per_ipu=[1, 1, 1"),
]

EVAL_CASES: list[tuple[str, list[str], str]] = [
    ("config not YAML", ["evaluate", "{tmp}/not_yaml.yaml"], "not valid YAML"),
    ("config missing", ["evaluate", "{tmp}/missing.yaml"], "missing.yaml"),
    ("config a list", ["evaluate", "{tmp}/a_list.yaml"], "expected a mapping"),
    ("config bad knob", ["evaluate", "{tmp}/bad_knob.yaml"], "plan.io_tiles"),
    ("config count for a switch", ["evaluate", "{tmp}/switch_count.yaml"],
     "plan.offload_optimizer_state=1: allowed: true or false"),
    ("config system not a preset", ["evaluate", "{tmp}/system_name.yaml"],
     "system='pod99': not a system preset; allowed: a mapping"),
    ("config system a number", ["evaluate", "{tmp}/system_number.yaml"],
     "system: expected a mapping, got 16"),
    ("config hosts 0", ["evaluate", "{tmp}/hosts_0.yaml"], "system.hosts=0"),
    ("config empty", ["evaluate", "{tmp}/empty.yaml"], "empty"),
    ("ipu_config.json not JSON", ["evaluate", "{tmp}/good.yaml",
     "plan.from_ipu_config=/etc/passwd"],
     "plan.from_ipu_config='/etc/passwd': a readable ipu_config.json"),
    ("config ipu_config.json not JSON", ["evaluate", "{tmp}/passwd_plan.yaml"],
     "plan.from_ipu_config='/etc/passwd': a readable ipu_config.json"),
    ("config unknown top key", ["evaluate", "{tmp}/plans.yaml"], "plans: unknown top-level key"),
    ("config unknown nested key", ["evaluate", "{tmp}/nested_key.yaml"], "microbatch"),
    ("config latin-1", ["evaluate", "{tmp}/latin1.yaml"], "not a UTF-8 text file"),
    ("config NUL bytes", ["evaluate", "{tmp}/nul.yaml"], "binary file"),
    ("config 2000 deep", ["evaluate", "{tmp}/deep.yaml"], "nested deeper than"),
    ("config billion laughs", ["evaluate", "{tmp}/bomb.yaml"], "aliases"),
    ("config key twice", ["evaluate", "{tmp}/dup.yaml"],
     "key 'precision' given twice in one mapping (line 4); allowed: each key once"),
    ("config over 1 MiB", ["evaluate", "{tmp}/big.yaml"], "larger than"),
    ("config names code", ["evaluate", "{tmp}/target.yaml"], "--trust-remote-code"),
    ("config names os.system", ["evaluate", "{tmp}/os_system.yaml", "--trust-remote-code"],
     "model._target_='os.system'"),
    ("config GA 10**20", ["evaluate", "{tmp}/huge_ga.yaml"], "plan.gradient_accumulation="),
    ("config 9-d input", ["evaluate", "{tmp}/many_dims.yaml"], "model.input_shape="),
    ("config study name", ["evaluate", "{tmp}/study_key.yaml"], "study: unknown top-level key"),
    ("config a FIFO", ["evaluate", "{tmp}/fifo.journal"], "not a regular file"),
    ("override list never closed", ["evaluate", "{tmp}/good.yaml", "plan.io_tiles=[1,"],
     "'plan.io_tiles=[1,': Hydra's override grammar cannot read"),
    ("config int of 4301 digits", ["evaluate", "{tmp}/huge_int.yaml"], "4300 digits"),
    ("override int of 4301 digits", ["evaluate", "{tmp}/good.yaml",
                                     "plan.gradient_accumulation=" + "1" * 4301], "4300 digits"),
    ("override 200 levels deep", ["evaluate", "{tmp}/good.yaml",
                                  "+model.kwargs.foo=" + "[" * 200 + "]" * 200], "deeper than 50"),
    ("constants int of 4301 digits", ["evaluate", "{tmp}/good.yaml", "--constants",
                                      "{tmp}/huge_int.yaml"], "constants file"),
    ("override with several values", ["evaluate", "{tmp}/good.yaml",
                                      "plan.gradient_accumulation=1,2"],
     "evaluate takes one value per key"),
    ("constants missing", ["evaluate", "{tmp}/good.yaml", "--constants", "{tmp}/no.yaml"],
     "no.yaml"),
    ("constants binary", ["evaluate", "{tmp}/good.yaml", "--constants", "{tmp}/binary.yaml"],
     "binary.yaml"),
    ("config dataset typo", ["evaluate", "{tmp}/dataset_typo.yaml"],
     "model.dataset.name='imagenett': allowed:"),
    ("override dataset typo", ["evaluate", "{tmp}/good.yaml", "model.dataset.name=imagenett"],
     "model.dataset.name='imagenett': allowed:"),
]

STUDY_CASES: list[tuple[str, list[str], str]] = [
    ("studies no storage", ["studies", "--storage", "{tmp}/none.journal"],
     "--storage='{tmp}/none.journal': no such study storage"),
    ("studies empty results dir", ["studies", "--results-dir", "{tmp}/confdir"],
     "--results-dir='{tmp}/confdir': no study storage there"),
    ("studies results dir a device", ["studies", "--results-dir", "/dev/zero"],
     "--results-dir='/dev/zero'"),
    ("studies corrupt db", ["studies", "--storage", "sqlite:///{tmp}/corrupt.db"],
     "--storage='sqlite:///{tmp}/corrupt.db'"),
    ("studies not a url", ["studies", "--storage", "::nope::"], "::nope::"),
    ("report unknown study", ["report", "nope", "--results-dir", "{study}"], "study='nope'"),
    ("report no storage", ["report", "s", "--storage", "{tmp}/none.journal"], "none.journal"),
    ("report 300-char study", ["report", "y" * 300, "--results-dir", "{study}"], "yyyyyyyy"),
    ("export unknown study", ["export", "nope", "--output", "{tmp}/t.csv", "--results-dir",
                              "{study}"], "study='nope'"),
    ("export bad suffix", ["export", "s", "--output", "{tmp}/t.txt", "--results-dir", "{study}"],
     "t.txt"),
    ("export to /proc", ["export", "s", "--output", "/proc/t.csv", "--results-dir", "{study}"],
     "/proc/t.csv"),
    ("export onto a directory", ["export", "s", "--output", "{tmp}/a_dir.csv", "--results-dir",
                                 "{study}"], "a_dir.csv"),
    ("export onto a FIFO", ["export", "s", "--output", "{tmp}/out_fifo.csv", "--results-dir",
                            "{study}"], "--output='{tmp}/out_fifo.csv': exists and is a FIFO"),
    ("export onto a symlink", ["export", "s", "--output", "{tmp}/out_link.csv", "--results-dir",
                               "{study}"], "out_link.csv': exists and is a symlink"),
    ("export onto a device's link", ["export", "s", "--output", "{tmp}/full.csv",
                                      "--results-dir", "{study}"], "full.csv': exists and is a"),
    # argparse's errors of the commands: one line naming the command, not its usage.
    ("studies extra argument", ["studies", "extra"],
     "ipu-tune studies: unrecognized arguments: extra"),
    ("trials sort by nothing", ["trials", "s", "--sort", "", "--results-dir", "{study}"],
     "--sort='': no column ''"),
    ("trials top not a number", ["trials", "s", "--top", "abc", "--results-dir", "{study}"],
     "ipu-tune trials: argument --top"),
    ("trials compared with NaN", ["trials", "s", "--where", "samples/s>nan", "--results-dir",
                                  "{study}"], "nan is not a number to compare with"),
    ("export without --output", ["export", "s", "--results-dir", "{study}"],
     "ipu-tune export: the following arguments are required: --output"),
    ("profile input shape not a number", ["profile", "resnet18", "--input-shape", "abc"],
     "ipu-tune profile: argument --input-shape"),
    ("profile unknown model", ["profile", "nope"], "nope"),
    ("profile os.system", ["profile", "--target", "os.system"], "model._target_='os.system'"),
    ("profile getoutput", ["profile", "--target", "subprocess.getoutput"], "subprocess.getoutput"),
    ("profile no module", ["profile", "--target", "no_such_mod.make"], "no_such_mod"),
    ("profile huge dim", ["profile", "resnet18", "--input-shape", "3", "10000000", "8"],
     "model.input_shape=[3, 10000000, 8]"),
    ("profile classes zero", ["profile", "resnet18", "--num-classes", "0"], "model.num_classes=0"),
    ("profile huge sequence", ["profile", "bert_base", "--sequence-length", "100000000"],
     "model.sequence_length=100000000"),
    ("profile bad kwarg", ["profile", "resnet18", "--kwarg", "nope"], "--kwarg 'nope'"),
    ("profile kwarg of 4301 digits", ["profile", "resnet18", "--kwarg", "foo=" + "1" * 4301],
     "--kwarg 'foo'='1111"),
    ("profile kwarg of 4301 digits: why", ["profile", "resnet18", "--kwarg", "foo=" + "1" * 4301],
     "1111': an integer of more than 4300 digits"),
    ("profile kwarg 200 levels deep", ["profile", "resnet18", "--kwarg",
                                       "foo=" + "[" * 200 + "]" * 200], "--kwarg 'foo': nested"),
    ("profile kwarg not YAML", ["profile", "resnet18", "--kwarg", "foo=[unclosed"],
     "--kwarg 'foo': not valid YAML"),
    ("profile kwarg builds an object", ["profile", "resnet18", "--kwarg",
                                        "foo=!!python/object/apply:os.system [true]"],
     "the YAML tag !!python/object/apply:os.system builds a Python object; allowed: plain "
     "values"),
    ("calibrate int of 4301 digits", ["calibrate", "{tmp}/huge_int_rows.yaml"], "4300 digits"),
    ("calibrate csv int of 4301 digits", ["calibrate", "{tmp}/huge_int.csv"],
     "calibration CSV column 'plan.io_tiles'"),
    ("profile 2-d image", ["profile", "resnet18", "--input-shape", "3", "64"],
     "model.input_shape=[3, 64]"),
    ("calibrate missing", ["calibrate", "{tmp}/missing.yaml"], "missing.yaml"),
    ("calibrate a device", ["calibrate", "/dev/zero"], "not a regular file"),
    ("calibrate a FIFO", ["calibrate", "{tmp}/fifo.journal"], "not a regular file"),
    ("calibrate binary", ["calibrate", "{tmp}/binary.yaml"], "binary.yaml"),
    ("calibrate binary csv", ["calibrate", "{tmp}/latin1.csv"], "latin1.csv"),
    ("calibrate not YAML", ["calibrate", "{tmp}/not_yaml.yaml"], "not valid YAML"),
    ("calibrate names code", ["calibrate", "{tmp}/rows_target.yaml"], "--trust-remote-code"),
    ("calibrate deep", ["calibrate", "{tmp}/deep.yaml"], "nested deeper than"),
    ("calibrate bomb", ["calibrate", "{tmp}/bomb.yaml"], "aliases"),
    ("calibrate key twice", ["calibrate", "{tmp}/dup.yaml"], "key 'precision' given twice"),
    ("calibrate nothing measured", ["calibrate", "{tmp}/rows_empty.yaml"], "nothing measured"),
    ("calibrate an infinite rate", ["calibrate", "{tmp}/rows_inf.yaml"],
     "row1.samples_per_s=inf: must be in 0.001..1e+09"),
    ("calibrate a tiny cycle count", ["calibrate", "{tmp}/rows_tiny.yaml"],
     "row1.device_cycles=1e-300: must be in 1000..1e+15"),
    ("calibrate a boolean rate", ["calibrate", "{tmp}/rows_bool.yaml"],
     "row1.samples_per_s=True: must be a number"),
    ("calibrate an infinite weight", ["calibrate", "{tmp}/rows_inf_weight.yaml"],
     "row1.weight=inf: must be in 1e-06..1e+06"),
    ("calibrate csv column twice", ["calibrate", "{tmp}/column_twice.csv"],
     "column 'model.name' appears twice"),
    ("calibrate max evals", ["calibrate", "--max-evals", "1"], "--max-evals=1"),
    ("calibrate max evals huge", ["calibrate", "--max-evals", "10000000000"],
     "--max-evals=10000000000: must be in 10..1,000,000"),
    ("calibrate check with a fit option", ["calibrate", "--check", "--fit", "clock_hz"],
     "--fit=clock_hz"),
    ("calibrate check to a file", ["calibrate", "--check", "--output", "{tmp}/c.yaml"],
     "--output="),
    ("calibrate constants without check", ["calibrate", "--constants", "{tmp}/binary.yaml"],
     "only with --check"),
    ("calibrate json without check", ["calibrate", "--json"], "--json: only with --check"),
    ("calibrate check, constants missing", ["calibrate", "--check", "--constants",
                                            "{tmp}/no.yaml"], "no.yaml"),
    ("calibrate output /proc", ["calibrate", "--max-evals", "10", "--output", "/proc/c.yaml"],
     "/proc/c.yaml"),
    ("calibrate output a device", ["calibrate", "--max-evals", "10", "--output", "/dev/full"],
     "--output='/dev/full': exists and is a character device"),
    ("calibrate output a FIFO", ["calibrate", "--max-evals", "10", "--output",
                                 "{tmp}/fifo.journal"], "exists and is a FIFO"),
    ("trials results dir of 5000 bytes", ["trials", "s", "--results-dir", "d" * 5000],
     "--results-dir='dddd"),
    ("studies results dir of 5000 bytes", ["studies", "--results-dir", "d" * 5000],
     "a path too long for the file system"),
    ("calibrate output a symlink", ["calibrate", "--max-evals", "10", "--output",
                                    "{tmp}/out_link.yaml"], "exists and is a symlink"),
]


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for what is not a plain file)."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() and not p.is_symlink()
            else None for p in root.rglob("*")}


ALL_CASES = CASES + EVAL_CASES + STUDY_CASES + PROBE_CASES + PROBE_B_CASES


def test_the_table_covers_every_command() -> None:
    assert len(ALL_CASES) >= 100
    commands = {a[0] for _, a, _ in EVAL_CASES + STUDY_CASES}
    assert commands == {"evaluate", "studies", "report", "export", "profile", "calibrate",
                        "trials"}


@pytest.mark.parametrize(("case", "args", "expected"), ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_bad_input_is_one_line(
    case: str, args: list[str], expected: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    write_fixtures(tmp_path)
    monkeypatch.chdir(tmp_path)
    study = str(request.getfixturevalue("stored_study")) if any(
        "{study}" in a or a in ("report", "export") for a in args) else ""
    before = _snapshot(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{study}", study) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2, case
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert err.startswith("ipu-tune: error: "), err
    assert expected.replace("{tmp}", str(tmp_path)) in err, err
    assert "Traceback" not in err
    assert "pw@" not in err and "=pw" not in err  # credentials never printed
    assert "SECRET" not in err and "CRET@" not in err
    assert len(err) < 1500, "a long value is cut, not echoed in full"
    assert _snapshot(tmp_path) == before, "a bad input wrote something"


@pytest.mark.parametrize("url", ["postgresql://u:pw@127.0.0.1:1/x",
                                 "postgresql://u:pw@nowhere.invalid/x"])
def test_an_unreachable_server_is_a_fault_not_bad_input(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that does not answer is a fault of the run (exit 1; the same command works once
    it answers), as a full disk is; before, it was bad input (2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(["studies", "--storage", url])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "pw@" not in err, err
    assert err.startswith(f"ipu-tune: error: --storage={url.replace(':pw@', ':***@')!r}: "
                          "cannot open ("), err
    assert err.endswith("; run the same command again once the server is reachable"), err


@pytest.mark.parametrize("storage", [
    "study.storage=postgresql://u:pw@127.0.0.1:1/x",
    "study.storage='postgresql+psycopg2://u@127.0.0.1:1/x?password=pw'",
    "study.storage=postgresql://u:pw/SECRET@127.0.0.1:1/x",
    "study.storage=postgresql://u:SE@CRET@127.0.0.1:1/x"])
def test_a_password_in_an_unreachable_storage_url_is_never_printed(
        storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["model=mnist_cnn", "study.n_trials=1", "study.progress_bar=false", storage])
    # A server that does not answer: a fault; a bare '@' in the password: bad input, refused
    # before any server is tried.
    assert exit_info.value.code == (2 if "SE@CRET" in storage else 1)
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ipu-tune: error: study.storage="), err
    assert "pw@" not in err and "=pw" not in err and "SECRET" not in err and "CRET@" not in err


def test_bad_override_in_a_real_process(tmp_path: Path) -> None:
    proc = run_cli(["plan.io_tiles=33", "study.n_trials=1"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "plan.io_tiles=33" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
