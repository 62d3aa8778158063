"""Bad input: one clear line naming the key and what is allowed, exit 2, no traceback, and
nothing written. Table-driven over the command line of the tuner and of `evaluate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipu_tune.__main__ import main
from tests.conftest import run_cli

# (id, arguments, text the one-line message must contain). `{tmp}` is the test's directory.
CASES: list[tuple[str, list[str], str]] = [
    ("unknown model option", ["model=nope"], "model=nope"),
    ("unknown system option", ["system=nope"], "system=nope"),
    ("unknown search option", ["search=nope"], "search=nope"),
    ("unknown sampler option", ["sampler=nope"], "sampler=nope"),
    ("unknown experiment", ["+experiment=nope"], "experiment=nope"),
    ("wrong type", ["plan.gradient_accumulation=abc"], "plan.gradient_accumulation"),
    ("unknown key", ["plan.foo=1"], "foo"),
    ("micro-batch zero", ["workload.micro_batch_size=0"], "workload.micro_batch_size"),
    ("io_tiles odd", ["plan.io_tiles=33"], "plan.io_tiles"),
    ("io_tiles below 32", ["plan.io_tiles=30"], "plan.io_tiles"),
    ("io_tiles above 192", ["plan.io_tiles=194"], "plan.io_tiles"),
    ("num_ipus not a power of two", ["system.num_ipus=3"], "system.num_ipus"),
    ("precision", ["plan.precision=8.8"], "plan.precision"),
    ("schedule", ["plan.pipeline.schedule=zigzag"], "plan.pipeline.schedule"),
    ("recompute", ["plan.recompute=always"], "plan.recompute"),
    ("amp above 1", ["plan.available_memory_proportion=1.5"], "available_memory_proportion"),
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
    ("unknown zoo name", ["model.name=nope"], "nope"),
    ("target does not import", ["model._target_=no_such_module.make"], "no_such_module"),
    ("empty search space", ["search.space={tmp}/empty.yaml"], "empty.yaml"),
    ("malformed search space", ["search.space={tmp}/malformed.yaml"], "malformed.yaml"),
    ("low above high", ["search.space={tmp}/low_high.yaml"], "low_high.yaml"),
    ("storage not reachable", ["study.storage=postgresql://u:pw@127.0.0.1:1/x"], "study.storage"),
    ("results dir not writable", ["results_dir={tmp}/a_file/sub"], "results_dir"),
    ("corrupted database", ["study.storage=sqlite:///{tmp}/corrupt.db"], "corrupt.db"),
    ("sweep with one bad value", ["-m", "plan.io_tiles=0,33"], "plan.io_tiles"),
]

EVAL_CASES: list[tuple[str, list[str], str]] = [
    ("config not YAML", ["evaluate", "{tmp}/not_yaml.yaml"], "not valid YAML"),
    ("config missing", ["evaluate", "{tmp}/missing.yaml"], "missing.yaml"),
    ("config a list", ["evaluate", "{tmp}/a_list.yaml"], "expected a mapping"),
    ("config bad knob", ["evaluate", "{tmp}/bad_knob.yaml"], "plan.io_tiles"),
]


def _fixtures(tmp: Path) -> None:
    (tmp / "empty.yaml").write_text("")
    (tmp / "malformed.yaml").write_text("knobs: [unclosed\n  - : :\n")
    (tmp / "low_high.yaml").write_text(
        "knobs:\n  gradient_accumulation: {type: int, low: 64, high: 2}\n"
    )
    (tmp / "a_file").write_text("I am a file")
    (tmp / "corrupt.db").write_bytes(b"garbage" * 1000)
    (tmp / "not_yaml.yaml").write_text("model: {name: [resnet101\nplan: : :\n")
    (tmp / "a_list.yaml").write_text("- 1\n- 2\n")
    (tmp / "bad_knob.yaml").write_text("plan: {io_tiles: 7}\n")


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize(("case", "args", "expected"), CASES + EVAL_CASES,
                         ids=[c[0] for c in CASES + EVAL_CASES])
def test_bad_input_is_one_line(
    case: str, args: list[str], expected: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fixtures(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2, case
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert err.startswith("ipu-tune: error: "), err
    assert expected.replace("{tmp}", str(tmp_path)) in err, err
    assert "Traceback" not in err
    assert "pw@" not in err  # credentials never printed
    assert _snapshot(tmp_path) == before, "a bad input wrote something"


def test_bad_override_in_a_real_process(tmp_path: Path) -> None:
    proc = run_cli(["plan.io_tiles=33", "study.n_trials=1"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "plan.io_tiles=33" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []
