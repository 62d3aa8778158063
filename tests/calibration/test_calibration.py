"""Validation against the measured runs, and the fitting machinery.

The tolerances are the stated ones: the seed ladder's rates within 10%, every released point
(MLPerf ResNet-50, BERT-Large SL128) within 5%,
execution-trace cycle counts within 15%, the seed's fit/out-of-memory verdicts exact (the seed
plan entered as the seed states it: no recompute key, PopTorch's default). They fail when
predictions drift.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from ipu_tune.calibration import (
    POINTS_FILE,
    CalibrationPoint,
    Prediction,
    default_points,
    fit_constants,
    load_points,
    loss,
    nelder_mead,
    predict,
)
from ipu_tune.errors import IpuTuneError
from ipu_tune.simulator import DEFAULT_CONSTANTS, FITTED, constants_from_mapping

RATE_TOLERANCE = 0.10
CYCLE_TOLERANCE = 0.15
SEED_RATES = ["seed_fp16_ga8", "seed_fp16_ga8_di4", "seed_fp16_ga8_di4_8bit",
              "seed_fp16_ga8_di4_8bit_async"]
MLPERF = ["mlperf_resnet50_pod16", "mlperf_resnet50_pod64", "mlperf_resnet50_bow_pod16"]
RELEASED = [*MLPERF, "bert_large_sl128_bow_pod16"]
RELEASED_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def predictions() -> dict[str, Prediction]:
    return {p.point.name: p for p in predict(default_points())}


def test_points_copied_with_provenance() -> None:
    text = POINTS_FILE.read_text()
    header = "".join(text.splitlines()[:5])
    assert "MLCommons" in header and "hands-on ResNet-101" in header
    names = [p.name for p in default_points()]
    assert len(names) == len(set(names))
    assert set(RELEASED) | {"bert_base_sl512_fits"} <= set(names)
    assert set(MLPERF) <= set(names)


def test_seed_runs_are_entered_as_the_seed_states_them() -> None:
    """No recompute key (PopTorch's default, `auto`), no partials key (float)."""
    for p in default_points():
        if p.name.startswith("seed_"):
            assert p.config.plan.recompute == "auto", p.name
            assert p.config.plan.partials == "float", p.name


def test_mlperf_points_share_one_encoding() -> None:
    """Every MLPerf row differs only in what its record states (IPU, IPUs, micro-batch, GA) and
    in what follows from the IPU count (servers, instances)."""
    rows = {p.name: p.config for p in default_points() if p.name in MLPERF}
    first = rows[MLPERF[0]]
    for cfg in rows.values():
        assert cfg.model == first.model
        n = cfg.system.num_ipus
        assert cfg.plan.replication_factor == n and cfg.system.servers == n // 16
        assert cfg.plan.host_instances == n // 2
        for key in ("precision", "device_iterations", "eight_bit_io", "recompute", "partials",
                    "available_memory_proportion", "async_dataloader", "dataloader_workers",
                    "prefetch_depth", "io_tiles"):
            assert getattr(cfg.plan, key) == getattr(first.plan, key), key


def test_seed_fp32_ga3_does_not_fit(predictions: dict[str, Prediction]) -> None:
    r = predictions["seed_fp32_ga3"].result
    assert not r.fits
    assert r.throughput == 0.0
    assert r.bottleneck == "out_of_memory"
    assert r.reason.startswith("IPU")


def test_seed_fp16_ga3_fits(predictions: dict[str, Prediction]) -> None:
    r = predictions["seed_fp16_ga3"].result
    assert r.fits, r.reason
    assert r.throughput > 0.0


@pytest.mark.parametrize("name", RELEASED)
def test_released_rates_within_5_percent(predictions: dict[str, Prediction], name: str) -> None:
    p = predictions[name]
    assert p.result.fits, p.result.reason
    measured = p.point.samples_per_s
    assert measured is not None
    assert abs(p.result.throughput / measured - 1.0) <= RELEASED_TOLERANCE, (
        f"{name}: {p.result.throughput:.0f} vs measured {measured:.0f} samples/s")


def test_shipped_bert_base_sl512_fits(predictions: dict[str, Prediction]) -> None:
    r = predictions["bert_base_sl512_fits"].result
    assert r.fits, r.reason
    assert max(m.max_tile_bytes / m.tile_limit_bytes for m in r.memory) <= 1.0


@pytest.mark.parametrize("name", SEED_RATES)
def test_measured_rates_within_10_percent(predictions: dict[str, Prediction], name: str) -> None:
    p = predictions[name]
    assert p.result.fits, p.result.reason
    measured = p.point.samples_per_s
    assert measured is not None
    assert abs(p.result.throughput / measured - 1.0) <= RATE_TOLERANCE, (
        f"{name}: {p.result.throughput:.0f} vs measured {measured:.0f} samples/s")


@pytest.mark.parametrize(
    "name", ["seed_fp16_ga3", "seed_fp16_ga8", "seed_fp16_ga8_di4", "seed_fp16_ga8_di4_8bit"]
)
def test_trace_cycles_within_15_percent(predictions: dict[str, Prediction], name: str) -> None:
    p = predictions[name]
    measured = p.point.device_cycles
    assert measured is not None
    # Device-only time of one call: DI x step device time + the per-call device cost.
    r = p.result
    device_step = sum(v for k, v in r.phases.items()
                      if k not in ("host_preprocess", "host_overhead"))
    plan_di = p.point.config.plan.device_iterations
    call_cycles = (plan_di * device_step + DEFAULT_CONSTANTS.call_overhead_s) * 1.33e9
    assert call_cycles == pytest.approx(r.extras["device_call_cycles"], rel=1e-9)
    assert abs(call_cycles / measured - 1.0) <= CYCLE_TOLERANCE, (
        f"{name}: {call_cycles / 1e6:.1f}M vs measured {measured / 1e6:.1f}M cycles")


def test_every_row_within_its_stated_tolerance(predictions: dict[str, Prediction]) -> None:
    for p in predictions.values():
        if p.point.result is not None:
            assert (p.memory_ratio <= 1.0) == (p.point.result == "fits"), p.point.name
        for value in p.errors().values():
            assert p.point.tolerance is not None
            assert abs(value) <= p.point.tolerance, (p.point.name, p.errors())


def test_ga_slope_matches_the_traces(predictions: dict[str, Prediction]) -> None:
    """The trace difference GA8 - GA3 is five micro-batches through the pipeline (~7.1M
    cycles each): the per-micro-batch slot of the simulator must match it within 20%."""
    ga3, ga8 = predictions["seed_fp16_ga3"], predictions["seed_fp16_ga8"]
    assert ga3.point.device_cycles and ga8.point.device_cycles
    measured = (ga8.point.device_cycles - ga3.point.device_cycles) / 5
    predicted = (ga8.device_cycles - ga3.device_cycles) / 5
    assert abs(predicted / measured - 1.0) <= CYCLE_TOLERANCE


def test_loss_is_small_with_the_default_constants(predictions: dict[str, Prediction]) -> None:
    assert loss(predictions.values()) < 0.05


def test_nelder_mead_finds_a_quadratic_minimum() -> None:
    x, fx = nelder_mead(lambda v: (v[0] - 1.5) ** 2 + 3 * (v[1] + 0.5) ** 2, [0.0, 0.0],
                        max_evals=500)
    assert x[0] == pytest.approx(1.5, abs=1e-3)
    assert x[1] == pytest.approx(-0.5, abs=1e-3)
    assert fx < 1e-6


def test_fit_recovers_perturbed_host_constants() -> None:
    """Start from wrong host constants; a short fit on the seed's wall-clock rows brings the
    loss down and the rates back within tolerance."""
    rows = [p for p in default_points() if p.name.startswith("seed_fp16_ga8")]
    wrong = DEFAULT_CONSTANTS.with_values({
        "preprocess_s_per_sample": DEFAULT_CONSTANTS.preprocess_s_per_sample * 2.0,
        "convert_s_per_element": DEFAULT_CONSTANTS.convert_s_per_element * 0.4,
    })
    fit = fit_constants(rows, base=wrong, names=["preprocess_s_per_sample",
                                                 "convert_s_per_element"],
                        max_evals=200, restarts=0)
    assert fit.loss_after < fit.loss_before / 20
    for p in fit.predictions:
        for value in p.errors().values():
            assert abs(value) <= RATE_TOLERANCE
    assert fit.constants.preprocess_s_per_sample == pytest.approx(
        DEFAULT_CONSTANTS.preprocess_s_per_sample, rel=0.25)


def _inference_rows() -> list[CalibrationPoint]:
    """ResNet-50 inference on synthetic data at device iterations 1, 10 and 100: rows that
    depend on the inference call's cost and on the device, not on the host's data pipeline."""
    rows = []
    for di, rate in ((1, 2000.0), (10, 2500.0), (100, 2700.0)):
        rows.extend(load_points([{
            "name": f"r50_b1_di{di}", "samples_per_s": rate,
            "model": {"name": "resnet50", "dataset": {"name": "synthetic"}},
            "system": {"ipu": "mk2", "num_ipus": 1},
            "workload": {"mode": "infer", "micro_batch_size": 1},
            "plan": {"precision": "16.16", "partials": "half", "device_iterations": di}}]))
    return rows


def test_a_fit_leaves_the_constants_no_row_depends_on() -> None:
    """Training's call cost and the host pipeline's constants moved by chance on inference
    rows with synthetic data, and the file carried them to every other run."""
    fit = fit_constants(_inference_rows(), max_evals=60, restarts=0)
    assert set(fit.unmoved) == {"call_overhead_s", "preprocess_s_per_sample",
                                "convert_s_per_element", "stream_latency_s"}
    for name in fit.unmoved:
        assert getattr(fit.constants, name) == getattr(DEFAULT_CONSTANTS, name)
    assert "matmul_efficiency" in fit.names
    with pytest.raises(IpuTuneError, match=r"calibrate.fit='call_overhead_s': no row's"):
        fit_constants(_inference_rows(), names=["matmul_efficiency", "call_overhead_s"])
    # Enough rows: as many as the constants refitted (3), not as the 7 asked for.
    with pytest.raises(IpuTuneError, match=r"^calibrate: 2 measured rows for 3 constants"):
        fit_constants(_inference_rows()[:2], max_evals=10, restarts=0)


def test_the_inference_call_cost_is_refitted_from_rows_at_one_device_iteration() -> None:
    fit = fit_constants(_inference_rows(), names=["infer_call_overhead_s"], max_evals=200)
    assert fit.names == ("infer_call_overhead_s",)
    assert fit.constants.infer_call_overhead_s != DEFAULT_CONSTANTS.infer_call_overhead_s
    assert fit.loss_after < fit.loss_before


@pytest.mark.parametrize("name", ["r0\ncall_overhead_s: 0.19 #", "red \x1b[31m", "x" * 201,
                                  "   "])
def test_a_row_name_is_one_printable_line(name: str) -> None:
    """A newline in a name began a line of its own in `calibrate --output`'s YAML: a constant
    the fit never wrote, which `--constants` then applied."""
    row = {"name": name, "model": {"name": "mnist_cnn"}, "samples_per_s": 1000}
    with pytest.raises(IpuTuneError, match=r"^row1\.name=.*printable text on one line, not blank"):
        load_points([row])


def test_fit_rejects_unknown_constant() -> None:
    with pytest.raises(IpuTuneError, match=r"calibrate.fit"):
        fit_constants(default_points()[:1], names=["no_such_constant"])


def test_load_points_from_csv(tmp_path: Path) -> None:
    csv_file = tmp_path / "runs.csv"
    csv_file.write_text(
        "name,model.name,model.input_shape,system.num_ipus,plan.precision,"
        "plan.gradient_accumulation,plan.pipeline.splits,samples_per_s,result\n"
        "a,resnet101,\"[3, 64, 64]\",2,16.16,8,[layer3.8],1075,\n"
        "b,resnet101,\"[3, 64, 64]\",2,32.32,3,[layer3.8],,out_of_memory\n"
    )
    rows = load_points(csv_file)
    assert [r.name for r in rows] == ["a", "b"]
    assert rows[0].config.plan.pipeline.splits == ["layer3.8"]
    assert rows[0].config.plan.precision == "16.16"
    assert rows[0].samples_per_s == 1075 and rows[0].result is None
    assert rows[1].result == "out_of_memory" and rows[1].samples_per_s is None


def test_load_points_rejects_rows_without_measurement(tmp_path: Path) -> None:
    f = tmp_path / "runs.yaml"
    f.write_text(yaml.safe_dump([{"model": {"name": "resnet101"}}]))
    with pytest.raises(IpuTuneError, match="nothing measured"):
        load_points(f)
    f.write_text(yaml.safe_dump([{"model": {"name": "resnet101"}, "result": "maybe"}]))
    with pytest.raises(IpuTuneError, match="result"):
        load_points(f)


def test_constants_from_mapping_overrides_and_checks() -> None:
    c = constants_from_mapping({"call_overhead_s": 0.01})
    assert c.call_overhead_s == 0.01
    assert c.matmul_efficiency == DEFAULT_CONSTANTS.matmul_efficiency
    with pytest.raises(IpuTuneError, match="unknown constant") as err:
        constants_from_mapping({"aws_secret_access_key": "TOPSECRET123"})
    assert "TOPSECRET123" not in str(err.value)  # a file any stored study may name
    with pytest.raises(IpuTuneError, match="positive"):
        constants_from_mapping({"call_overhead_s": -1.0})
    with pytest.raises(IpuTuneError, match=r"constants.matmul_efficiency=True: must be a number"):
        constants_from_mapping({"matmul_efficiency": True})


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("call_overhead_s", 1e-300, "in 0.0001..0.2"),  # a fitted one: its search bounds
    ("matmul_efficiency", 1.5, "in 0.05..1"),
    ("ipu_link_efficiency", 1.2, "in 0.00085..1"),  # a share of a peak: at most 1
    ("sync_latency_s", 1.0, "in 3e-11..3e-05"),  # 1000x either way of the shipped 30 ns
    ("io_tile_overhead", 1e-4, "in 0.00105..1050"),  # its printed bound is allowed (below)
])
def test_constants_out_of_range_are_refused(key: str, value: float, allowed: str) -> None:
    with pytest.raises(IpuTuneError, match=f"constants.{key}=.*: must be {allowed}$"):
        constants_from_mapping({key: value})
    low_edge = constants_from_mapping({key: float(allowed.split()[1].split("..")[0])})
    assert getattr(low_edge, key) > 0
    for name, (low, high) in FITTED.items():
        value = getattr(DEFAULT_CONSTANTS, name)
        assert low <= value <= high and math.isfinite(value), name


@pytest.mark.parametrize(("plan", "key"), [
    ({"io_tiles": 33}, "plan.io_tiles=33"),
    ({"gradient_accumulation": 4}, "plan.gradient_accumulation=4"),
])
def test_a_bad_key_in_a_file_names_the_file_and_the_row(tmp_path: Path, plan: dict[str, int],
                                                         key: str) -> None:
    """`plan.io_tiles=33: allowed ...` alone does not say which file or row holds it."""
    good = {"name": "good", "model": {"name": "mnist_cnn"}, "samples_per_s": 1000}
    bad = {"name": "bad_row", "model": {"name": "mnist_cnn"}, "workload": {"mode": "infer"},
           "plan": plan, "samples_per_s": 1000}
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump([good, bad]))
    with pytest.raises(IpuTuneError) as got:
        load_points(path)
    assert str(got.value).startswith(f"calibration file {str(path)!r}: bad_row: {key}: ")
