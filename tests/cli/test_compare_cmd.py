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
