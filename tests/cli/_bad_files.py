"""The hostile and malformed files the bad-input table names as `{tmp}/NAME`."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.cli._probe_cases_b import write_probe_b_fixtures


def write_fixtures(tmp: Path) -> None:
    """Every file and folder the cases of tests/cli/test_bad_input.py read."""
    write_probe_b_fixtures(tmp)
    (tmp / "confdir").mkdir(exist_ok=True)  # an empty --config-dir
    (tmp / "ok.yaml").write_text("model: {name: resnet18}\n")
    # Lists and mappings inside a typed list, in a file and in an experiment (below).
    (tmp / "nested.yaml").write_text(
        "model: {name: resnet18}\nplan: {pipeline: {splits: [[a], {b: 1}]}}\n")
    (tmp / "empty.yaml").write_text("")
    (tmp / "malformed.yaml").write_text("knobs: [unclosed\n  - : :\n")
    (tmp / "low_high.yaml").write_text(
        "knobs:\n  gradient_accumulation: {type: int, low: 64, high: 2}\n"
    )
    (tmp / "a_file").write_text("I am a file")
    # A file where a study's export folder belongs; a folder where the results table belongs.
    (tmp / "r_ff").mkdir(exist_ok=True)
    (tmp / "r_ff" / "mnist_cnn-mk2x2-throughput").write_text("x")
    (tmp / "r_db" / "results.db").mkdir(parents=True, exist_ok=True)
    (tmp / "corrupt.db").write_bytes(b"garbage" * 1000)
    (tmp / "not_yaml.yaml").write_text("model: {name: [resnet101\nplan: : :\n")
    (tmp / "a_list.yaml").write_text("- 1\n- 2\n")
    (tmp / "bad_knob.yaml").write_text("plan: {io_tiles: 7}\n")
    (tmp / "switch_count.yaml").write_text("plan: {offload_optimizer_state: 1}\n")
    (tmp / "system_name.yaml").write_text("system: pod99\n")
    (tmp / "system_number.yaml").write_text("system: 16\n")
    (tmp / "hosts_0.yaml").write_text("system: {num_ipus: 4, hosts: 0}\n")
    (tmp / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp / "deep.yaml").write_text("[" * 2000 + "]" * 2000 + "\n")
    # safe_load would keep the last of two values silently.
    (tmp / "dup.yaml").write_text('model: {name: resnet50}\nplan:\n  precision: "16.16"\n'
                                  '  precision: "32.32"\n')
    (tmp / "rf8.json").write_text('{"replication_factor": 8}')
    (tmp / "amp_list.json").write_text(
        '{"layers_per_ipu": [-1, -1], "matmul_proportion": [0.05, 1.5]}')
    (tmp / "exp" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "exp" / "experiment" / "rf8.yaml").write_text(
        "# @package _global_\nplan: {replication_factor: 8}\n")
    (tmp / "exp" / "experiment" / "obj.yaml").write_text(
        "# @package _global_\nsearch: {objectives: [[throughput]]}\n")
    (tmp / "dup.json").write_text('{"layers_per_ipu": [0, 8], "layers_per_ipu": [8, 0]}')
    (tmp / "own").mkdir()
    (tmp / "own" / "config.json").write_text(
        '{"model_type": "mine", "auto_map": {"AutoModel": "modeling_mine.Mine"}}')
    (tmp / "own" / "modeling_mine.py").write_text(f"open({str(tmp / 'ran')!r}, 'w')\n")
    (tmp / "dup_space.yaml").write_text("knobs: {}\nknobs: {plan.precision: {}}\n")
    laughs = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (tmp / "bomb.yaml").write_text("\n".join(laughs) + "\n")
    (tmp / "big.yaml").write_text("# padding\n" * 120_000 + "plan: {}\n")
    (tmp / "plans.yaml").write_text("plans: {precision: '16.16'}\n")
    (tmp / "nested_key.yaml").write_text("workload: {microbatch: 8}\n")
    (tmp / "latin1.yaml").write_bytes("model: {name: r\xe9snet}\n".encode("latin-1"))
    (tmp / "latin1.csv").write_bytes("name,samples_per_s\nr\xe9,1\n".encode("latin-1"))
    (tmp / "nul.yaml").write_bytes(b"plan: {}\n\x00\x00\n")
    (tmp / "target.yaml").write_text("model: {_target_: tests.models.factories.tiny_mlp}\n")
    (tmp / "os_system.yaml").write_text(
        f"model: {{_target_: os.system, kwargs: {{command: 'touch {tmp}/sentinel'}}}}\n")
    # Python refuses to read an int of over 4300 digits; json's decoder recurses per level.
    huge = "1" * 4301
    (tmp / "huge_int.yaml").write_text(f"plan: {{gradient_accumulation: {huge}}}\n")
    (tmp / "huge_int_rows.yaml").write_text(
        f"- {{model: {{name: mnist_cnn}}, samples_per_s: 1, plan: {{io_tiles: {huge}}}}}\n")
    (tmp / "huge_int.csv").write_text(f"name,samples_per_s,plan.io_tiles\nx,1,{huge}\n")
    (tmp / "deep_objects.json").write_text('{"a":' * 5000 + "1" + "}" * 5000)
    (tmp / "deep_lists.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp / "pwdir" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "pwdir" / "experiment" / "pw.yaml").write_text(
        "# @package _global_\nstudy: {storage: 'postgresql://u:SECRETPW@127.0.0.1:1/x'}\n")
    (tmp / "pwdir_escaped" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "pwdir_escaped" / "experiment" / "pw.yaml").write_text(  # `@` as YAML's escape
        '# @package _global_\nstudy: {storage: "postgresql://u:SECRETPW\\u0040127.0.0.1:1/x"}\n')
    (tmp / "pwdir_nested" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "pwdir_nested" / "vault").mkdir(parents=True, exist_ok=True)
    (tmp / "pwdir_nested" / "experiment" / "pw.yaml").write_text(  # a file of another package
        "# @package _global_\ndefaults:\n  - /vault@study: pg\n")
    (tmp / "pwdir_nested" / "vault" / "pg.yaml").write_text(
        "storage: 'postgresql://u:SECRETPW@127.0.0.1:1/x'\n")
    (tmp / "huge_ga.yaml").write_text("plan: {gradient_accumulation: 100000000000000000000}\n")
    (tmp / "many_dims.yaml").write_text("model: {input_shape: [1, 1, 1, 1, 1, 1, 1, 1, 1]}\n")
    (tmp / "study_key.yaml").write_text("study: {name: x}\n")
    (tmp / "rows_target.yaml").write_text(
        "- {model: {_target_: tests.models.factories.tiny_mlp, input_shape: [8]}, "
        "samples_per_s: 100}\n")
    (tmp / "rows_empty.yaml").write_text("- {model: {name: resnet18}}\n")
    (tmp / "rows_inf.yaml").write_text("- {model: {name: resnet18}, samples_per_s: .inf}\n")
    (tmp / "rows_tiny.yaml").write_text("- {model: {name: resnet18}, device_cycles: 1.0e-300}\n")
    (tmp / "rows_bool.yaml").write_text("- {model: {name: resnet18}, samples_per_s: true}\n")
    (tmp / "rows_inf_weight.yaml").write_text(
        "- {model: {name: resnet18}, samples_per_s: 100, weight: .inf}\n")
    (tmp / "column_twice.csv").write_text(
        "name,model.name,samples_per_s,model.name\nx,resnet18,100,resnet50\n")
    (tmp / "a_dir.csv").mkdir()
    (tmp / "passwd_plan.yaml").write_text("model: {name: mnist_cnn}\n"
                                          "plan: {from_ipu_config: /etc/passwd}\n")
    (tmp / "good.yaml").write_text("model: {name: mnist_cnn, input_shape: [1, 28, 28]}\n")
    (tmp / "exp" / "experiment" / "mbs.yaml").write_text(
        "# @package _global_\nworkload:\n  micro_batch_size: 1e3\n")
    (tmp / "switch" / "experiment").mkdir(parents=True, exist_ok=True)
    (tmp / "switch" / "experiment" / "count.yaml").write_text(
        "# @package _global_\nplan:\n  eight_bit_io: 2\n")
    (tmp / "exp" / "experiment" / "imagenett.yaml").write_text(
        "# @package _global_\nmodel:\n  dataset:\n    name: imagenett\n")
    (tmp / "dataset_typo.yaml").write_text("model: {name: mnist_cnn, dataset: {name: imagenett}}\n")
    # A proportion a number's smallest step above 0: the simulator's pass count was infinite.
    (tmp / "amp_tiny.json").write_text(
        '{"layers_per_ipu": [-1, -1], "matmul_proportion": [1e-320, 0.2]}')
    (tmp / "amp_tiny.yaml").write_text(
        "model: {name: mnist_cnn}\nplan: {available_memory_proportion: 1.0e-320}\n")
    # Values of another shape than their key's: OmegaConf named neither the key nor the value.
    (tmp / "amp_scalar.yaml").write_text(
        "model: {name: mnist_cnn}\nplan: {available_memory_proportion_per_ipu: 0.3}\n")
    (tmp / "amp_null.yaml").write_text(
        "model: {name: mnist_cnn}\nplan: {available_memory_proportion_per_ipu: [0.3, null]}\n")
    (tmp / "pipeline_list.yaml").write_text("model: {name: mnist_cnn}\nplan: {pipeline: [a]}\n")
    (tmp / "exp" / "experiment" / "amp_null.yaml").write_text(
        "# @package _global_\nplan: {available_memory_proportion_per_ipu: null}\n")
    (tmp / "exp" / "experiment" / "splits_map.yaml").write_text(
        "# @package _global_\nplan: {pipeline: {splits: {a: 1}}}\n")
    (tmp / "exp" / "model").mkdir(exist_ok=True)
    (tmp / "exp" / "model" / "shape.yaml").write_text("name: mnist_cnn\ninput_shape: 3\n")
    (tmp / "long_list.json").write_text('{"layers_per_ipu": [' + ", ".join(["1"] * 50000) + "]}")
    con = sqlite3.connect(tmp / "sqlite.journal")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    (tmp / "app.log").write_text("2024-01-01 started\nno final newline")
    (tmp / "notes.txt").write_text("notes\nkeep me")
    (tmp / "link.journal").symlink_to(tmp / "notes.txt")
    os.mkfifo(tmp / "fifo.journal")
    (tmp / "cdir.db.claims").mkdir()
    os.mkfifo(tmp / "cfifo.db.claims")
    (tmp / "cdev.db.claims").symlink_to("/dev/null")
    (tmp / "config.pickle").write_bytes(b"not read")
    # --output targets that are not regular files: never replaced by one.
    os.mkfifo(tmp / "out_fifo.csv")
    (tmp / "out_link.csv").symlink_to(tmp / "notes.txt")
    (tmp / "out_link.yaml").symlink_to(tmp / "notes.txt")
    (tmp / "full.csv").symlink_to("/dev/full")
