"""`evaluate` prints no rate for a plan that does not fit: it does not run, so it has none."""

from __future__ import annotations

import ipu_tune
from ipu_tune.cli.evaluate_format import format_result
from ipu_tune.config import load_config


def test_a_plan_that_does_not_fit_has_no_samples_per_second() -> None:
    cfg = load_config({"system": {"num_ipus": 1}, "workload": {"micro_batch_size": 4096}})
    result = ipu_tune.evaluate(cfg)
    assert not result.fits
    (line,) = [x for x in format_result(result, cfg).splitlines() if x.startswith("throughput")]
    assert "samples/s" not in line and line.startswith("throughput: none")


def test_a_host_bound_plan_says_why_its_small_host_phase_is_the_bottleneck() -> None:
    """The asynchronous loader hides most of the host's work: the phase shows only the wait,
    so the step line gives the host's and the device's whole work a step."""
    plan = {"precision": "16.16", "gradient_accumulation": 10, "device_iterations": 100,
            "replication_factor": 16, "eight_bit_io": True, "async_dataloader": True,
            "dataloader_workers": 16, "host_instances": 8, "partials": "half",
            "available_memory_proportion": 0.15, "recompute": "checkpoints", "prefetch_depth": 3}
    cfg = load_config({"model": {"name": "resnet50"},
                       "system": {"num_ipus": 16, "host": {"cpu_cores": 128}},
                       "workload": {"micro_batch_size": 20, "optimizer": "sgd"}, "plan": plan})
    result = ipu_tune.evaluate(cfg)
    assert result.bottleneck == "host_preprocess"
    assert result.phases["host_preprocess"] < max(result.phases.values())
    (line,) = [x for x in format_result(result, cfg).splitlines() if x.startswith("step")]
    host_ms = float(line.split("host work takes ")[1].split(" ms")[0].replace(",", ""))
    device_ms = float(line.split("the device's ")[1].split(" ms")[0].replace(",", ""))
    assert device_ms < host_ms == round(result.step_time_s * 1e3, 2)


def test_a_factorys_plan_is_headed_by_the_factory_not_the_default_name() -> None:
    """A best.yaml of a `_target_` model kept the schema's default `name` (resnet101), which
    headed its figures."""
    cfg = load_config({"model": {"_target_": "tests.models.factories.needs_values",
                                 "input_shape": [8]}, "system": {"num_ipus": 1}},
                      trust_remote_code=True)
    head = format_result(ipu_tune.evaluate(cfg), cfg).splitlines()[0]
    assert head.startswith("tests.models.factories.needs_values on 1 x mk2"), head


def test_an_inference_call_on_synthetic_data_is_not_said_to_cross_the_host() -> None:
    """Synthetic data is made on the IPU (PopTorch `enableSyntheticData`): the latency is the
    call's, with no input or result on the host, which the line said it spanned."""
    def latency_line(dataset: str) -> str:
        cfg = load_config({"model": {"name": "resnet50", "dataset": {"name": dataset}},
                           "system": {"ipu": "c600", "num_ipus": 1},
                           "workload": {"mode": "infer", "micro_batch_size": 1},
                           "plan": {"precision": "16.16"}})
        text = format_result(ipu_tune.evaluate(cfg), cfg)
        return next(x for x in text.splitlines() if x.startswith("latency:"))

    assert latency_line("synthetic").endswith("(the call: data made on the IPU, no host "
                                               "transfer)")
    assert latency_line("generated").endswith("(inputs on the host to results on the host)")


def test_a_step_of_one_sample_is_said_in_the_singular() -> None:
    def step_line(micro_batch: int) -> str:
        cfg = load_config({"model": {"name": "mnist_cnn"}, "system": {"num_ipus": 1},
                           "workload": {"mode": "infer", "micro_batch_size": micro_batch},
                           "plan": {"device_iterations": 1}})
        text = format_result(ipu_tune.evaluate(cfg), cfg)
        return next(x for x in text.splitlines() if x.startswith("step:"))

    assert " ms for 1 sample; " in step_line(1), step_line(1)
    assert " ms for 2 samples; " in step_line(2), step_line(2)
