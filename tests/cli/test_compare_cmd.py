"""`compare` keeps A's and B's values apart, and compares plans that move different numbers of
samples per step per sample too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ipu_tune.cli.compare_cmd import main as compare_main


def _plan(path: Path, plan: dict[str, object], ipus: int = 2) -> str:
    path.write_text(yaml.safe_dump({"model": {"name": "mnist_cnn"},
                                    "system": {"ipu": "mk2", "num_ipus": ipus}, "plan": plan}))
    return str(path)


def test_long_values_do_not_run_together_and_steps_are_compared_per_sample(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _plan(tmp_path / "a.yaml", {"replication_factor": 4, "gradient_accumulation": 8}, 4)
    b = _plan(tmp_path / "b.yaml", {"gradient_accumulation": 16,
                                     "pipeline": {"splits": ["layer2", "layer3", "layer4"]}}, 4)
    assert compare_main([a, b]) == 0
    text = capsys.readouterr().out
    assert "[][" not in text
    assert re.search(r"^splits  \*\n  A: \[\]\n  B: \[layer2, layer3, layer4\]$", text, re.M)
    rows = {line[:24].strip(): line[24:].split() for line in text.splitlines()}
    a_n, b_n = (int(v.replace(",", "")) for v in rows["samples per step"][:2])
    assert a_n == 2 * b_n  # half the GA on four replicas against one pipeline
    step = [float(v.replace(",", "")) for v in rows["step"][:2]]
    per = [float(v.replace(",", "")) for v in rows["step / samples per step"][:2]]
    assert per == pytest.approx([step[0] / a_n, step[1] / b_n], rel=0.01, abs=0.001)


def test_a_plan_that_does_not_fit_has_no_samples_per_second(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _plan(tmp_path / "a.yaml", {"replication_factor": 2})
    (tmp_path / "big.yaml").write_text(yaml.safe_dump({
        "model": {"name": "bert_large"}, "system": {"ipu": "mk2", "num_ipus": 1},
        "workload": {"micro_batch_size": 64}}))
    assert compare_main([a, str(tmp_path / "big.yaml")]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^samples/s\s+[\d,]+\s+-\s+\*$", text, re.M), text


def test_a_rate_below_one_sample_per_second_is_not_printed_as_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plan bound by 20 s of host preprocessing per sample on one loader worker runs at
    about 0.05 samples/s: a result, printed with its significant digits."""
    a = _plan(tmp_path / "a.yaml", {}, ipus=1)
    slow = yaml.safe_load(Path(a).read_text())
    slow["model"]["dataset"] = {"preprocess_s_per_sample": 20.0}
    slow["plan"] = {"dataloader_workers": 1, "async_dataloader": False}
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(slow))
    assert compare_main([a, str(tmp_path / "slow.yaml")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("samples/s"))
    rate = float(row.split()[2])
    assert 0.01 < rate < 0.1, row


@pytest.mark.parametrize(("section", "key", "value"), [
    ("model", "dataset", {"preprocess_s_per_sample": 0.04}),
    ("system", "host", {"cpu_cores": 2}),
    ("system", "host", {"network_bytes_per_s": 1e7}),
    ("model", "kwargs", {"hidden": 128}),
])
def test_every_key_that_differs_has_a_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str, key: str,
        value: dict[str, object]) -> None:
    """Keys outside the plan's knobs change the simulated figures too: before, only
    `model.dataset.preprocess_s_per_sample` differing showed step time +900% and no row
    naming the cause."""
    a = _plan(tmp_path / "a.yaml", {}, ipus=1)
    b = yaml.safe_load(Path(a).read_text())
    b.setdefault(section, {})[key] = value
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(b))
    assert compare_main([a, str(tmp_path / "b.yaml"), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plan"]}
    (sub, want), = value.items()
    row = rows[f"{section}.{key}.{sub}"]
    assert row["b"] == want and row["a"] != want and row["differs"]
    assert compare_main([a, str(tmp_path / "b.yaml")]) == 0
    text = capsys.readouterr().out
    assert re.search(rf"^{section}\.{key}\.{sub}\b.*\*", text, re.M), text
    assert f"  B: {want:g}" in text or re.search(rf"\b{want:g}\s+\*$", text, re.M), text


def _infer(path: Path, micro_batch: int, mode: str = "infer") -> str:
    path.write_text(yaml.safe_dump({
        "model": {"name": "bert_large_squad"}, "system": {"ipu": "mk2", "num_ipus": 4},
        "workload": {"mode": mode, "micro_batch_size": micro_batch},
        "plan": {"replication_factor": 4, "precision": "16.16", "partials": "half"}}))
    return str(path)


@pytest.mark.parametrize(("mode_a", "mode_b", "shown"), [
    ("infer", "infer", True), ("train", "infer", True), ("train", "train", False)])
def test_inference_plans_compare_their_latency_per_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mode_a: str, mode_b: str,
        shown: bool) -> None:
    a = _infer(tmp_path / "a.yaml", 4, mode_a)
    b = _infer(tmp_path / "b.yaml", 2, mode_b)
    assert compare_main([a, b]) == 0
    text = capsys.readouterr().out
    # A training plan of BERT-large this size does not fit: no latency ("-"), a difference.
    row = re.search(r"^latency per call \(ms\)\s+([\d.,]+|-)\s+([\d.,]+|-)\s+\*(?: ([+-]\d+)%)?$",
                    text, re.M)
    assert (row is not None) == shown, text
    assert compare_main([a, b, "--json"]) == 0
    result = {r["name"]: r for r in json.loads(capsys.readouterr().out)["result"]}
    assert ("latency_s" in result) == shown
    if row is not None and row.group(3) is not None:
        ms = [float(v.replace(",", "")) for v in row.groups()[:2]]
        assert ms == pytest.approx([1e3 * result["latency_s"][s] for s in "ab"], abs=1e-3)
        assert int(row.group(3)) == round(100 * (ms[1] / ms[0] - 1))


def test_no_row_marks_a_difference_its_printed_values_do_not_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Micro-batch 4 against 2: the stream buffers (tens of kB) printed 0.0 MB against 0.0 MB
    and were marked -100%; a phase a hair apart printed equal and was marked -0%."""
    assert compare_main([_infer(tmp_path / "a.yaml", 4), _infer(tmp_path / "b.yaml", 2)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if len(line) > 24 and not line.startswith(("A:", "B:", "  ", "("))]
    checked = 0
    for line in rows:
        cells = line[24:].split()
        if len(cells) < 2 or cells[:2] == ["A", "B"]:
            continue
        checked += 1
        marked = "*" in cells[2:]
        assert marked == (cells[0] != cells[1]), line
        assert not re.search(r"[+-]0%", line), line
    assert checked > 10
    from ipu_tune.cli.compare_cmd import _pct
    assert _pct(4.7231, 4.7229, "4.723", "4.723") == ""
    assert _pct(1.0, 1.0002, "1.0000", "1.0002") == "* +0.02%"


def test_a_knob_neither_plan_runs_has_no_row_and_one_side_reads_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _infer(tmp_path / "a.yaml", 4, "infer")
    b = _infer(tmp_path / "b.yaml", 2, "infer")
    assert compare_main([a, b, "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["plan"]}
    assert not {"GA", "recompute", "offload", "RTS"} & names, names
    c = _infer(tmp_path / "c.yaml", 2, "train")
    assert compare_main([a, c, "--json"]) == 0
    plan = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plan"]}
    ga = plan["GA"]
    assert ga["a"] == "not run" and ga["b"] != "not run" and ga["differs"]


def test_compare_has_no_row_for_a_knob_the_plans_do_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inference plans run no optimizer, token input no 8-bit I/O, one stage no schedule; an
    fp32 model runs no partials type (`not run` on its side)."""
    a = _infer(tmp_path / "a.yaml", 4, "infer")
    b = _infer(tmp_path / "b.yaml", 2, "infer")
    assert compare_main([a, b, "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["plan"]}
    assert not {"workload.optimizer", "8-bit I/O", "schedule"} & names, names
    fp32 = tmp_path / "c.yaml"
    fp32.write_text(yaml.safe_dump({
        "model": {"name": "bert_large_squad"}, "system": {"ipu": "mk2", "num_ipus": 4},
        "workload": {"mode": "infer", "micro_batch_size": 2},
        "plan": {"replication_factor": 4, "precision": "32.32", "partials": "half"}}))
    assert compare_main([a, str(fp32), "--json"]) == 0
    plan = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plan"]}
    assert plan["partials"]["a"] == "half" and plan["partials"]["b"] == "not run"


def test_compare_reads_hosts_as_the_servers_they_mean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`system.hosts: 1` and `hosts: null` on 4 IPUs are the same one server: no difference."""
    paths = []
    for name, hosts in (("a", 1), ("b", None), ("c", 2)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "model": {"name": "bert_large_squad"},
            "system": {"ipu": "mk2", "num_ipus": 4, "hosts": hosts},
            "workload": {"mode": "infer", "micro_batch_size": 2},
            "plan": {"replication_factor": 4, "precision": "16.16", "host_instances": 2}}))
        paths.append(str(path))
    assert compare_main([paths[0], paths[1], "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["plan"]}
    assert "system.hosts" not in names
    assert compare_main([paths[1], paths[2], "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plan"]}
    assert (rows["system.hosts"]["a"], rows["system.hosts"]["b"]) == (1, 2)
